"""The screenshot comparison's tolerance (tests/support/screenshots.py), on a committed reference.

Noise of the kind anti-aliasing makes (every channel a little off, or a few pixels far off)
passes; a box moved by two pixels or a different size fails, and the failure leaves the actual
and diff images behind and names them.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from support.screenshots import REFERENCES, UPDATING, Tolerance, check_screenshot, compare

# While references are regenerated a check writes instead of comparing: nothing to test then.
pytestmark = pytest.mark.skipif(UPDATING, reason="regenerating the references")
NAME = "desktop-light-top"


def _reference() -> Image.Image:
    with Image.open(REFERENCES / f"{NAME}.png") as image:
        return image.convert("RGB")


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_every_channel_off_by_the_channel_tolerance_still_matches() -> None:
    reference = _reference()
    tolerance = Tolerance()
    brighter = ImageChops.add(reference, Image.new("RGB", reference.size, (tolerance.channel,) * 3))
    darker = ImageChops.subtract(reference, Image.new("RGB", reference.size, (tolerance.channel,) * 3))
    assert compare(brighter, reference, tolerance).matches(tolerance)
    assert compare(darker, reference, tolerance).matches(tolerance)
    one_more = ImageChops.add(reference, Image.new("RGB", reference.size, (tolerance.channel + 1,) * 3))
    assert not compare(one_more, reference, tolerance).matches(tolerance)


def test_a_few_pixels_far_off_match_but_more_than_the_share_do_not() -> None:
    reference = _reference()
    tolerance = Tolerance()
    allowed = int(tolerance.share * reference.width * reference.height)
    rng = random.Random(5)
    spots = rng.sample(range(reference.width * reference.height), allowed + 1)

    def inverted_at(points: list[int]) -> Image.Image:
        image = reference.copy()
        pixels = image.load()
        assert pixels is not None
        for p in points:
            x, y = p % reference.width, p // reference.width
            r, g, b = reference.getpixel((x, y))  # type: ignore[misc]
            pixels[x, y] = (r ^ 0x80, g ^ 0x80, b ^ 0x80)  # every channel moves by 128
        return image

    assert compare(inverted_at(spots[:allowed]), reference, tolerance).matches(tolerance)
    assert not compare(inverted_at(spots), reference, tolerance).matches(tolerance)


def test_a_two_pixel_shift_fails_and_leaves_actual_and_diff_images(tmp_path: Path) -> None:
    reference = _reference()
    shifted = ImageChops.offset(reference, 0, 2)
    problem = check_screenshot(_png(shifted), NAME, tmp_path)
    assert problem is not None
    assert f"{tmp_path / (NAME + '.actual.png')}" in problem
    assert f"{tmp_path / (NAME + '.diff.png')}" in problem
    assert "CHATGATE_UPDATE_SCREENSHOTS=1" in problem
    with Image.open(tmp_path / f"{NAME}.diff.png") as diff:
        assert diff.size == reference.size
        assert (255, 0, 0) in {colour for _, colour in diff.convert("RGB").getcolors(1 << 20) or []}
    assert check_screenshot(_png(reference), NAME, tmp_path / "unused") is None


def test_a_different_size_fails_with_both_sizes_named(tmp_path: Path) -> None:
    reference = _reference()
    taller = Image.new("RGB", (reference.width, reference.height + 1), "white")
    taller.paste(reference)
    problem = check_screenshot(_png(taller), NAME, tmp_path)
    assert problem is not None
    assert "the sizes differ" in problem and f"{reference.size}" in problem
    assert (tmp_path / f"{NAME}.actual.png").exists()
