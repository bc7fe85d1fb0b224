"""Build a config section from a YAML file's data, and say what is wrong with every key.

msgspec checks one value against one type quickly, but it stops at the first mistake and
hides a mapping's keys in its error path (``$.profiles[...]``). A person fixing a config
file wants every mistake at once, each at its key and line, so the walk over sections,
lists and mappings is ours; each scalar is msgspec's (``strict=False``: ``"9000"`` from a
``CHATGATE_*`` variable is a port). What the walk adds over msgspec:

- an unknown key is a problem at that key (``unknown=True``: the caller suggests a spelling);
- a choice (``Literal``) matches in any case: ``log_level: info`` is ``INFO``;
- a section with ``numbers_as_text`` takes ``42`` where it expects text;
- ``Annotated[T, Check(fn)]`` runs ``fn`` on the converted value;
- a type with a ``conform`` classmethod (``PlatformSections``) builds itself.
"""

from __future__ import annotations

import contextlib
import functools
import types
import typing
from typing import Annotated, Any, Literal, Protocol, TypeVar

import msgspec

from chatgate.platforms.kit.section import Check, Section

KeyPath = tuple[str | int, ...]
T = TypeVar("T")
BAD: Any = object()
"""A value that had a problem: the section holding it is not built."""


class Problem(msgspec.Struct, frozen=True):
    """One mistake: the key's path, what is wrong, and whether the key is unknown."""

    path: KeyPath
    message: str
    unknown: bool = False


class Invalid(ValueError):
    """The data does not make the section; ``problems`` lists every mistake in file order."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__(
            "; ".join(
                f"{'.'.join(str(p) for p in pr.path) or '(top level)'}: {pr.message}" for pr in problems
            )
        )


class Builds(Protocol):
    """A type that builds itself from data (``conform`` calls ``cls.conform(data, path, problems)``)."""

    @classmethod
    def conform(cls, data: Any, path: KeyPath, problems: list[Problem]) -> Any: ...


def conform(cls: type[T], data: Any) -> T:
    """``cls`` built from ``data``; ``Invalid`` with every problem when it cannot be."""
    problems: list[Problem] = []
    value = conform_at(cls, data, (), problems)
    if problems:
        raise Invalid(problems)
    return typing.cast(T, value)


def conform_at(tp: Any, data: Any, path: KeyPath, problems: list[Problem], as_text: bool = False) -> Any:
    """The value of type ``tp`` at ``path``; on a problem, appends it and returns ``BAD``."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        checks = [m for m in meta if isinstance(m, Check)]
        limits = [m for m in meta if not isinstance(m, Check)]
        if limits and _is_scalar(base):
            value = _scalar(Annotated[(base, *limits)], data, path, problems, as_text)
        else:
            value = _limited(conform_at(base, data, path, problems, as_text), base, limits, path, problems)
        return _checked(value, checks, path, problems)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return _struct(tp, data, path, problems)
    if isinstance(tp, type) and hasattr(tp, "conform"):
        return typing.cast(Builds, tp).conform(data, path, problems)
    if origin in (typing.Union, types.UnionType):
        return _union(tp, data, path, problems, as_text)
    if origin is list:
        return _list(tp, data, path, problems, as_text)
    if origin is dict:
        return _dict(tp, data, path, problems, as_text)
    return _scalar(tp, data, path, problems, as_text)


def is_bad(value: Any) -> bool:
    """Whether ``conform_at`` returned the mark of a problem."""
    return value is BAD


def _is_scalar(tp: Any) -> bool:
    if isinstance(tp, type) and (issubclass(tp, msgspec.Struct) or hasattr(tp, "conform")):
        return False
    return typing.get_origin(tp) not in (list, dict, typing.Union, types.UnionType)


def _limited(value: Any, base: Any, limits: list[Any], path: KeyPath, problems: list[Problem]) -> Any:
    """A container's own limits (``Meta(max_length=...)``), checked once its items are."""
    if not limits or value is BAD:
        return value
    try:
        msgspec.convert(value, Annotated[(base, *limits)], strict=False)
    except msgspec.ValidationError as exc:
        problems.append(Problem(path, _plain(str(exc), value, ())))
        return BAD
    return value


def _checked(value: Any, checks: list[Check], path: KeyPath, problems: list[Problem]) -> Any:
    for check in checks:
        if value is BAD or value is None:
            return value
        try:
            value = check.fn(value)
        except ValueError as exc:
            problems.append(Problem(path, str(exc)))
            return BAD
    return value


def _struct(tp: type[msgspec.Struct], data: Any, path: KeyPath, problems: list[Problem]) -> Any:
    if isinstance(data, tp):
        return data
    if not isinstance(data, dict):
        problems.append(Problem(path, f"must be a section of keys (key: value lines), not {_kind(data)}"))
        return BAD
    if issubclass(tp, Section):
        data = tp.before(dict(data))
    as_text = bool(getattr(tp, "numbers_as_text", False))
    fields = _fields(tp)
    values: dict[str, Any] = {}
    ok = True
    for key, raw in data.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            problems.append(Problem((*path, str(key)), "unknown key", unknown=True))
            ok = False
            continue
        value = conform_at(field.type, raw, (*path, key), problems, as_text)
        ok = ok and value is not BAD
        values[field.name] = value
    for field in fields.values():
        if field.required and field.encode_name not in data:
            problems.append(Problem((*path, field.encode_name), "required: this key has no default"))
            ok = False
    if not ok:
        return BAD
    try:
        return tp(**values)
    except (ValueError, TypeError) as exc:  # __post_init__: a rule over several keys
        problems.append(Problem(path, str(exc)))
        return BAD


@functools.cache
def _fields(tp: type[msgspec.Struct]) -> dict[str, msgspec.structs.FieldInfo]:
    return {f.encode_name: f for f in msgspec.structs.fields(tp)}


def _union(tp: Any, data: Any, path: KeyPath, problems: list[Problem], as_text: bool) -> Any:
    args = typing.get_args(tp)
    if data is None and type(None) in args:
        return None
    rest = [a for a in args if a is not type(None)]
    if len(rest) == 1:
        return conform_at(rest[0], data, path, problems, as_text)
    return _scalar(tp, data, path, problems, as_text)


def _list(tp: Any, data: Any, path: KeyPath, problems: list[Problem], as_text: bool) -> Any:
    if not isinstance(data, list):
        problems.append(Problem(path, f"must be a list (- item lines or [a, b]), not {_kind(data)}"))
        return BAD
    (item,) = typing.get_args(tp) or (Any,)
    values = [conform_at(item, v, (*path, i), problems, as_text) for i, v in enumerate(data)]
    return BAD if any(v is BAD for v in values) else values


def _dict(tp: Any, data: Any, path: KeyPath, problems: list[Problem], as_text: bool) -> Any:
    if not isinstance(data, dict):
        problems.append(Problem(path, f"must be a mapping (name: value lines), not {_kind(data)}"))
        return BAD
    key_type, value_type = typing.get_args(tp) or (Any, Any)
    values: dict[Any, Any] = {}
    ok = True
    for key, raw in data.items():
        name = _scalar(key_type, key, (*path, str(key)), problems, as_text)
        value = conform_at(value_type, raw, (*path, str(key)), problems, as_text)
        ok = ok and name is not BAD and value is not BAD
        values[name] = value
    return values if ok else BAD


def _scalar(tp: Any, data: Any, path: KeyPath, problems: list[Problem], as_text: bool) -> Any:
    if tp is Any:
        return data
    if as_text and isinstance(data, int | float) and not isinstance(data, bool) and _takes_text(tp):
        data = str(data)
    if isinstance(data, str):
        data = _from_text(data, _bare(tp))
    choices = _choices(tp)
    if choices and isinstance(data, str):
        data = next((c for c in choices if isinstance(c, str) and c.casefold() == data.casefold()), data)
    try:
        return msgspec.convert(data, tp, strict=False)
    except msgspec.ValidationError as exc:
        problems.append(Problem(path, _plain(str(exc), data, choices)))
        return BAD


_YES_NO = {"yes": True, "y": True, "on": True, "t": True, "no": False, "n": False, "off": False, "f": False}
"""What a variable may say for a boolean beyond msgspec's ``true``/``false``/``1``/``0``."""


def _from_text(text: str, base: Any) -> Any:
    """A variable's text as the number or boolean it spells as Python would read it
    (``" 9000"``, ``"+1"``, ``"9_000"``, ``"yes"``); anything else is left for msgspec to refuse."""
    if base is bool:
        return _YES_NO.get(text.strip().lower(), text)
    if base is int or base is float:
        with contextlib.suppress(ValueError):
            return base(text)
    return text


def whole_number(value: Any) -> int | None:
    """``value`` as an int the way a key of type ``int`` would take it, else None."""
    if isinstance(value, str):
        value = _from_text(value, int)
    try:
        return msgspec.convert(value, int, strict=False)
    except msgspec.ValidationError:
        return None


def _bare(tp: Any) -> Any:
    return typing.get_args(tp)[0] if typing.get_origin(tp) is Annotated else tp


def _takes_text(tp: Any) -> bool:
    return _bare(tp) is str


def _choices(tp: Any) -> tuple[Any, ...]:
    base = _bare(tp)
    return typing.get_args(base) if typing.get_origin(base) is Literal else ()


_WORDS = {
    "`int`": "a whole number",
    "`float`": "a number",
    "`str`": "text",
    "`bool`": "true or false",
    "`object`": "a mapping",
    "`array`": "a list",
    "`null`": "nothing (null)",
}


def _plain(message: str, data: Any, choices: tuple[Any, ...]) -> str:
    """msgspec's ``Expected `int` >= 0, got `str``` said for the person editing the file."""
    message = message.split(" - at `$", 1)[0]
    if choices:
        return f"must be one of: {', '.join(str(c) for c in choices)}"  # never the value: it may be a secret
    for word, plain in _WORDS.items():
        message = message.replace(word, plain)
    return message.replace("Expected ", "expected ", 1)


def _kind(data: Any) -> str:
    if data is None:
        return "nothing (an empty value)"
    if isinstance(data, list):
        return "a list"
    if isinstance(data, dict):
        return "a section"
    return _WORDS.get(f"`{type(data).__name__}`", type(data).__name__)  # never the value: it may be a secret
