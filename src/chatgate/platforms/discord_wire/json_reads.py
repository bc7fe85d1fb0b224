"""Typed reads of untrusted JSON: a wrong type becomes a ``Reject`` with a reason naming the field.

Used by the relay's decoders, which turn any rejection into a structured refusal and
never raise on input.
"""

from __future__ import annotations

from typing import Any, NoReturn

from chatgate.domain.errors import ChatgateError


class Reject(ChatgateError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def fail(reason: str) -> NoReturn:
    raise Reject(reason)


def obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        fail(f"{where} must be an object, got {type(value).__name__}")
    return value


def opt_obj(parent: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    value = parent.get(key)
    return None if value is None else obj(value, f"{where}.{key}")


def need_str(parent: dict[str, Any], key: str, where: str) -> str:
    value = parent.get(key)
    if value is None:
        fail(f"{where}.{key} is missing")
    if not isinstance(value, str) or not value.strip():
        fail(f"{where}.{key} must be a non-empty string, got {show(value)}")
    return value


def opt_str(parent: dict[str, Any], key: str, where: str) -> str | None:
    return None if parent.get(key) is None else need_str(parent, key, where)


def opt_int(parent: dict[str, Any], key: str, where: str, *, required: bool = False) -> int | None:
    value = parent.get(key)
    if value is None:
        if required:
            fail(f"{where}.{key} is missing")
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        fail(f"{where}.{key} must be an integer, got {show(value)}")
    return value


def array(parent: dict[str, Any], key: str, where: str) -> list[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        fail(f"{where}.{key} must be an array, got {type(value).__name__}")
    return value


def str_array(parent: dict[str, Any], key: str, where: str) -> list[str]:
    values = array(parent, key, where)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            fail(f"{where}.{key}[{i}] must be a string, got {show(value)}")
    return values


def first_label(obj: Any, *keys: str) -> str | None:
    """First non-empty string among ``keys``: display labels are observations, read leniently."""
    if not isinstance(obj, dict):
        return None
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def show(value: Any) -> str:
    """A short description of a bad value (never a deep repr: the body may nest deeply)."""
    return repr(value)[:60] if isinstance(value, str | int | float) else type(value).__name__
