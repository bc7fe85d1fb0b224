"""Every key of the config models is in docs/chatgate.example.yaml, in its own section
(issue 31: the example said "Only sqlite exists today" and its Slack block lacked keys).
A key may be commented out there (an optional platform's block is), but it is named."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import msgspec

from chatgate.app import registry
from chatgate.app.config.model import GatewayConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "chatgate.example.yaml"


def _models(annotation: Any) -> list[type[msgspec.Struct]]:
    if typing.get_origin(annotation) is dict:
        return []
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _keys(model: type[msgspec.Struct], seen: frozenset[type] = frozenset()) -> set[str]:
    found: set[str] = set()
    for field in msgspec.structs.fields(model):
        found.add(field.encode_name)
        for inner in _models(field.type):
            if inner not in seen:
                found |= _keys(inner, seen | {model})
    return found


def _block(lines: list[str], start: re.Pattern[str], end: re.Pattern[str]) -> str:
    for i, line in enumerate(lines):
        if start.match(line):
            rest = [line]
            for after in lines[i + 1 :]:
                if end.match(after):
                    break
                rest.append(after)
            return "\n".join(rest)
    return ""


def _missing(block: str, keys: set[str]) -> list[str]:
    return sorted(k for k in keys if not re.search(rf"^[ #-]*{re.escape(k)}:", block, re.M))


def test_every_core_key_is_in_its_section_of_the_example() -> None:
    lines = EXAMPLE.read_text().splitlines()
    missing = []
    for field in msgspec.structs.fields(GatewayConfig):
        key = field.encode_name
        if key == "platforms":
            continue
        block = _block(lines, re.compile(rf"^#? ?{key}:"), re.compile(r"^[a-z_]+:"))
        assert block, f"no {key}: section"
        for inner in _models(field.type):
            missing += [f"{key}.{k}" for k in _missing(block, _keys(inner))]
    assert missing == []


def test_every_platforms_key_is_in_its_platforms_block_of_the_example() -> None:
    lines = EXAMPLE.read_text().splitlines()
    missing = []
    for name in registry.names():
        block = _block(lines, re.compile(rf"^  (# )?{name}:"), re.compile(r"^  (# )?[a-z_]+:\s*$|^\S"))
        assert block, f"no platforms.{name} block"
        missing += [f"platforms.{name}.{k}" for k in _missing(block, _keys(registry.plugin(name).section))]
    assert missing == []
