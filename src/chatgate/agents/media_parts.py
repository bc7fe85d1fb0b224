"""A message's files as Chat Completions content parts.

Images go as ``image_url`` parts with a ``data:`` URL when the model can see (its profile's ``vision``),
as a short note otherwise; a text document's or a PDF's text is inlined (the engine cut it to
``media.inline_chars``); anything else is a note saying what it is and that the model cannot
read it. When no part is an image the content stays one string, which every
OpenAI-compatible server accepts.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from chatgate.domain.media import MediaContent, MediaItem


def user_content(
    text: str, items: Sequence[MediaItem], contents: Mapping[str, MediaContent], vision: bool
) -> str | list[dict[str, Any]]:
    """The ``content`` of a user message: ``text`` and each of ``items``."""
    if not items:
        return text
    texts = [text] if text else []
    images: list[dict[str, Any]] = []
    for item in items:
        content = contents.get(item.sha)
        if content is None:
            texts.append(f"[file {item.label()}: not available to the model]")
        elif item.kind == "image" and content.data is not None:
            if vision:
                encoded = content.encoded or base64.b64encode(content.data).decode("ascii")
                url = f"data:{item.mime};base64,{encoded}"
                images.append({"type": "image_url", "image_url": {"url": url}})
            else:
                texts.append(f"[image {item.label()}: this model cannot see images]")
        elif content.text is not None:
            cut = f" ({content.note})" if content.note else ""
            texts.append(f"[content of {item.label()}{cut}]\n{content.text}\n[end of {item.name}]")
        else:
            texts.append(f"[file {item.label()}: {content.note or 'not readable by the model'}]")
    joined = "\n\n".join(texts)
    if not images:
        return joined
    return [{"type": "text", "text": joined}, *images]
