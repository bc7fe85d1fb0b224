"""The pictures in docs/webchat.md are the screenshot tests' references, byte for byte: a page
change that updates the references (and so passes its screenshot tests) cannot leave the docs
showing the old page (issue 34: the docs showed a composer without its attach button)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = ROOT / "tests" / "platforms" / "screenshots"
DOC_IMAGES = {
    "webchat-desktop-light.png": "desktop-light-top.png",
    "webchat-desktop-dark-approval.png": "desktop-dark-bottom.png",
    "webchat-phone-light.png": "phone-light-top.png",
    "webchat-desktop-math-versions.png": "features-desktop-light.png",
    "webchat-signin.png": "accounts-desktop-signin.png",
}


@pytest.mark.parametrize("doc_image", sorted(DOC_IMAGES))
def test_each_picture_of_the_web_chat_doc_is_its_screenshot_reference(doc_image: str) -> None:
    reference = REFERENCES / DOC_IMAGES[doc_image]
    shown = ROOT / "docs" / "images" / doc_image
    assert shown.read_bytes() == reference.read_bytes(), f"cp {reference} {shown}"


def test_the_doc_shows_every_picture_and_no_other() -> None:
    text = (ROOT / "docs" / "webchat.md").read_text(encoding="utf-8")
    shown = {part.split(")")[0] for part in text.split("](images/")[1:]}
    assert shown == set(DOC_IMAGES)
