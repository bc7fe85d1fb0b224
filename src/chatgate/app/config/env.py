"""``CHATGATE_*`` environment variables over the YAML file's values.

``CHATGATE_HTTP__PORT=9000`` sets ``http.port``; ``CHATGATE_HTTP='{"port": 9000}'`` sets the
whole section (JSON); ``CHATGATE_PLATFORMS__TELEGRAM__ENABLED=true`` reaches a platform's
section. A variable whose first part is not a top-level key (``CHATGATE_TEST_*``) is not
config and is left alone. Values stay strings; the models convert them.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from chatgate.domain.errors import ConfigError

PREFIX = "CHATGATE_"
NESTED = "__"


def overlay(data: dict[str, Any], environ: Mapping[str, str], top_level: Collection[str]) -> dict[str, Any]:
    """``data`` with every ``CHATGATE_*`` variable applied over it (the file is not changed)."""
    merged: dict[str, Any] = _copy(data)
    for name in sorted(environ):  # sorted: a section's JSON first, then its single keys over it
        if not name.upper().startswith(PREFIX):
            continue
        path = [part.lower() for part in name[len(PREFIX) :].split(NESTED)]
        if path[0] not in top_level or not all(path):
            continue
        _set(merged, path, _value(name, environ[name]), name)
    return merged


def _value(name: str, raw: str) -> Any:
    """JSON for a section or a list (``{...}``, ``[...]``); any other value stays a string."""
    text = raw.strip()
    if not text.startswith(("{", "[")):
        return raw
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"invalid CHATGATE_* environment variable {name}: not valid JSON ({exc}). A section"
            " variable such as CHATGATE_HTTP must hold JSON; or set one key at a time, e.g."
            " CHATGATE_HTTP__PORT=9000"
        ) from None


def _set(data: dict[str, Any], path: list[str], value: Any, name: str) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"{name}: {'.'.join(path[:-1])} is not a section, so it has no key {path[-1]}")
        node = child
    current = node.get(path[-1])
    if isinstance(current, dict) and isinstance(value, dict):
        node[path[-1]] = {**current, **value}
    else:
        node[path[-1]] = value


def _copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_copy(v) for v in data]
    return data
