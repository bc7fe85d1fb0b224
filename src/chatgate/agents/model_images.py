"""Images a model returns beside its text, as OpenRouter's and Vercel's OpenAI-compatible image
models send them: ``message.images`` (streamed as ``delta.images``), each
``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``.

Only inline ``data:`` images are taken: a remote URL is the model server's to host, and fetching
it would be a request to an address a model chose. Each is bounded before it is decoded; the
engine then checks its content like any file (``engine/model_images.py``).
"""

from __future__ import annotations

import base64
import binascii
import logging

from chatgate.agents.base import ImageMade
from chatgate.agents.openai_chunks import field_of, items_of

log = logging.getLogger(__name__)
MAX_IMAGES = 8
"""Images taken from one model call; more are dropped, logged."""
MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""An image's decoded size at most (the engine's media limits apply after this too)."""


def chunk_images(chunk: object) -> list[str]:
    """The image URLs a streamed chunk carries (``choices[].delta.images[].image_url.url``)."""
    urls = []
    for choice in items_of(field_of(chunk, "choices")):
        for image in items_of(field_of(field_of(choice, "delta"), "images")):
            url = field_of(field_of(image, "image_url"), "url")
            if isinstance(url, str):
                urls.append(url)
    return urls


def base64_bytes(data: str) -> bytes | None:
    """Base64 data (an image, a tool's audio or file) as bytes; None (logged) when it is over the
    bound or malformed. Blocking for a large one: call it in a thread."""
    if len(data) > (MAX_IMAGE_BYTES // 3 + 1) * 4:
        log.info("a file was not taken: over %d MB", MAX_IMAGE_BYTES // (1024 * 1024))
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        log.info("a file was not taken: its base64 is malformed")
        return None


def decoded(urls: list[str]) -> list[ImageMade]:
    """The inline images among ``urls``, decoded; the rest are logged and dropped. Blocking (up
    to 8 x 20 MB of base64): call it in a thread."""
    made = []
    for url in urls[:MAX_IMAGES]:
        head, comma, data = url.partition(",")
        if not (head.startswith("data:image/") and head.endswith(";base64") and comma):
            log.info("a model's image was not taken: only inline data: images are (%s)", head[:40])
            continue
        image = base64_bytes(data)
        if image is not None:
            made.append(ImageMade(image))
    if len(urls) > MAX_IMAGES:
        log.info("a model returned %d images; the first %d are taken", len(urls), MAX_IMAGES)
    return made
