"""Screenshots compared against committed reference PNGs, with a tolerance (Pillow).

A pixel differs when any channel differs by more than ``Tolerance.channel``; a screenshot
matches when at most ``Tolerance.share`` of its pixels differ (and the sizes are equal). That
absorbs anti-aliasing and sub-pixel noise but not a moved box or a changed colour.

``CHATGATE_UPDATE_SCREENSHOTS=1`` writes the screenshots as the new references instead of
comparing (docs/contributing.md). On a mismatch the actual image and a diff image (the
reference faded, differing pixels in red) are written to the test's ``tmp_path`` and named in
the failure.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageChops

UPDATE_ENV = "CHATGATE_UPDATE_SCREENSHOTS"
REFERENCES = Path(__file__).resolve().parent.parent / "platforms" / "screenshots"
REGENERATE = f"{UPDATE_ENV}=1 .venv/bin/pytest tests/platforms/test_webchat_screenshots.py"
# Read at import: the web chat tests' autouse fixture removes every CHATGATE_* variable.
UPDATING = os.environ.get(UPDATE_ENV) == "1"


@dataclass(frozen=True)
class Tolerance:
    channel: int = 16  # 0-255: a channel must move more than this for the pixel to count
    share: float = 0.0002  # of all pixels: 204 of a 1280x800 screenshot, 65 of a 390x844 one


@dataclass(frozen=True)
class Comparison:
    """How an actual screenshot differs from its reference."""

    same_size: bool
    differing: int
    total: int
    mask: Image.Image | None  # 255 where a pixel differs

    def matches(self, tolerance: Tolerance) -> bool:
        return self.same_size and self.differing <= tolerance.share * self.total

    def describe(self) -> str:
        if not self.same_size:
            return "the sizes differ"
        return f"{self.differing} of {self.total} pixels differ ({self.differing / self.total:.4%})"


def compare(actual: Image.Image, reference: Image.Image, tolerance: Tolerance) -> Comparison:
    """Per-pixel comparison with a per-channel threshold."""
    a, r = actual.convert("RGB"), reference.convert("RGB")
    total = r.width * r.height
    if a.size != r.size:
        return Comparison(False, total, total, None)
    bands = ImageChops.difference(a, r).split()
    over = [band.point(lambda v: 255 if v > tolerance.channel else 0) for band in bands]
    mask = ImageChops.lighter(ImageChops.lighter(over[0], over[1]), over[2])
    differing = total - mask.histogram()[0]
    return Comparison(True, differing, total, mask)


def diff_image(reference: Image.Image, comparison: Comparison) -> Image.Image:
    """The reference faded to grey, with every differing pixel in red."""
    faded = Image.blend(reference.convert("L").convert("RGB"), Image.new("RGB", reference.size, "white"), 0.6)
    if comparison.mask is None:
        return faded
    red = Image.new("RGB", reference.size, (255, 0, 0))
    return Image.composite(red, faded, comparison.mask)


def check_screenshot(
    png: bytes, name: str, out_dir: Path, tolerance: Tolerance | None = None, references: Path = REFERENCES
) -> str | None:
    """None when ``png`` matches the reference ``name``.png, else why (with the files written).

    With CHATGATE_UPDATE_SCREENSHOTS=1 the screenshot becomes the reference and None is returned.
    """
    tolerance = tolerance or Tolerance()
    reference_path = references / f"{name}.png"
    if UPDATING:
        references.mkdir(parents=True, exist_ok=True)
        reference_path.write_bytes(png)
        return None
    if not reference_path.exists():
        return f"no reference {reference_path}: make it with {REGENERATE}"
    actual = Image.open(io.BytesIO(png))
    with Image.open(reference_path) as reference:
        reference.load()
        comparison = compare(actual, reference, tolerance)
        if comparison.matches(tolerance):
            return None
        actual_path = out_dir / f"{name}.actual.png"
        diff_path = out_dir / f"{name}.diff.png"
        actual_path.write_bytes(png)
        if comparison.same_size:
            diff_image(reference, comparison).save(diff_path)
        sizes = f"actual {actual.size}, reference {reference.size}"
    return (
        f"{name}: {comparison.describe()} (tolerance: channel > {tolerance.channel}, at most "
        f"{tolerance.share:.3%} of pixels; {sizes}). Actual: {actual_path}"
        + (f", diff: {diff_path}" if comparison.same_size else "")
        + f". If the change is intended, regenerate the references: {REGENERATE}"
    )
