"""Capability descriptors the simulator answers ``hello`` with, and what they allow."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CONTRACT_VERSION = 1
# Without ``supported_ops`` a gateway may use exactly these (the contract's legacy set).
LEGACY_OPS = frozenset({"send", "edit", "typing", "follow_up"})
# The ops this simulator can answer; anything else is refused even if advertised.
SIMULATED_OPS = frozenset(
    {
        "send",
        "edit",
        "typing",
        "follow_up",
        "prompt",
        "react",
        "delete",
        "draft",
        "task_card",
        "task_card_stop",
        "send_media",
    }
)
LEN_UNITS = ("chars", "utf16")

_DEFAULTS: dict[str, dict[str, Any]] = {
    "discord": {
        "label": "Discord",
        "max_message_length": 2000,
        "supports_draft_streaming": False,
        "supports_edit": True,
        "supports_threads": True,
        "markdown_dialect": "discord",
        "len_unit": "chars",
    },
    "telegram": {
        "label": "Telegram",
        "max_message_length": 4096,
        "supports_draft_streaming": False,
        "supports_edit": True,
        "supports_threads": True,
        "markdown_dialect": "markdown_v2",
        "len_unit": "utf16",
    },
    "slack": {
        "label": "Slack",
        "max_message_length": 40000,
        "supports_draft_streaming": False,
        "supports_edit": True,
        "supports_threads": True,
        "markdown_dialect": "mrkdwn",
        "len_unit": "chars",
    },
}
_GENERIC: dict[str, Any] = {
    "max_message_length": 4096,
    "supports_draft_streaming": False,
    "supports_edit": False,
    "supports_threads": False,
    "markdown_dialect": "plain",
    "len_unit": "chars",
}


def build_descriptor(platform: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The per-platform defaults with ``overrides`` on top; raises ValueError on a bad field."""
    if not platform or not isinstance(platform, str):
        raise ValueError("a descriptor needs a non-empty platform name")
    base = _DEFAULTS.get(platform, {**_GENERIC, "label": platform.title()})
    descriptor: dict[str, Any] = {"contract_version": CONTRACT_VERSION, "platform": platform, **base}
    descriptor.update(overrides or {})
    descriptor["contract_version"] = CONTRACT_VERSION
    descriptor["platform"] = platform
    if descriptor["len_unit"] not in LEN_UNITS:
        raise ValueError(f"{platform}: len_unit must be one of {LEN_UNITS}, not {descriptor['len_unit']!r}")
    limit = descriptor["max_message_length"]
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise ValueError(f"{platform}: max_message_length must be a non-negative integer")
    ops = descriptor.get("supported_ops")
    if ops is None:
        descriptor.pop("supported_ops", None)
    elif isinstance(ops, str) or not all(isinstance(op, str) for op in ops):
        raise ValueError(f"{platform}: supported_ops must be a list of op names")
    else:
        descriptor["supported_ops"] = list(ops)
    return descriptor


def descriptors_by_platform(items: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Index descriptor dicts (full or partial, each naming its platform) by platform."""
    result: dict[str, dict[str, Any]] = {}
    for item in items:
        platform = item.get("platform")
        if not isinstance(platform, str) or platform in result:
            raise ValueError(f"each descriptor needs a distinct platform name, got {platform!r}")
        result[platform] = build_descriptor(platform, item)
    return result


def allowed_ops(descriptor: Mapping[str, Any]) -> frozenset[str]:
    ops = descriptor.get("supported_ops")
    return frozenset(ops) if ops else LEGACY_OPS  # absent or empty: the legacy set, as the contract says


def max_length(descriptor: Mapping[str, Any]) -> int:
    """The contract says 0 means 4096."""
    return int(descriptor["max_message_length"]) or 4096


def measure(text: str, len_unit: str) -> int:
    """Length of text in the platform's unit: code points, or UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2 if len_unit == "utf16" else len(text)
