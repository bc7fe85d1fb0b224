"""Config mistakes phrased for the person who made them: the file, the line, the fix.

A validation error names the key as a dotted path, the line of the YAML file it is
on, and for a misspelt key the nearest valid one. YAML syntax errors name the file
and line instead of PyYAML's ``"<unicode string>"``.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any

import msgspec
import yaml

from chatgate.app import registry
from chatgate.app.config.platforms import PlatformSections
from chatgate.platforms.kit.conform import Invalid, KeyPath
from chatgate.platforms.kit.section import Section


def parse_yaml(path: Path, text: str) -> tuple[Any, dict[KeyPath, int]]:
    """The document and the 1-based line of every key in it (``ValueError`` when not YAML)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}, line {mark.line + 1} column {mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValueError(f"config file {where} is not valid YAML: {problem}") from exc
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _index(node, (), lines, path, ())
    return data, lines


def _index(
    node: yaml.Node, prefix: KeyPath, lines: dict[KeyPath, int], path: Path, above: tuple[int, ...]
) -> None:
    if id(node) in above:  # an anchor used inside itself: no config is infinitely deep
        line = node.start_mark.line + 1
        raise ValueError(f"config file {path}, line {line}: a YAML anchor is used inside itself")
    above = (*above, id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                at = (*prefix, str(key.value))
                lines[at] = key.start_mark.line + 1
                _index(value, at, lines, path, above)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*prefix, i)] = item.start_mark.line + 1
            _index(item, (*prefix, i), lines, path, above)


def describe(exc: Invalid, where: str, model: type[Section], lines: dict[KeyPath, int]) -> str:
    """Every problem of ``exc`` on its own line: key, line, problem, and a spelling hint."""
    out = [f"invalid configuration in {where}:"]
    for problem in exc.problems:
        loc = problem.path
        key = ".".join(str(p) for p in loc) or "(top level)"
        line = _line_of(loc, lines)
        at = f" (line {line})" if line else ""
        message = "unknown key" + _did_you_mean(model, loc) if problem.unknown else problem.message
        out.append(f"  {key}{at}: {message}")
    out.append("See docs/configuration.md for every key and its default.")
    return "\n".join(out)


def _line_of(loc: KeyPath, lines: dict[KeyPath, int]) -> int | None:
    for end in range(len(loc), 0, -1):  # a missing key is reported at its section's line
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def _did_you_mean(model: type[Section], loc: KeyPath) -> str:
    fields = _fields_at(model, loc[:-1])
    if not fields or not loc:
        return " (check the spelling)"
    close = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; valid keys here: {', '.join(sorted(fields))}"


def _fields_at(model: type[Section], loc: KeyPath) -> list[str]:
    """The key names of the section at ``loc`` (through nested sections, lists and dicts)."""
    current: type[msgspec.Struct] | None = model
    i = 0
    while i < len(loc) and current is not None:
        field = _field_types(current).get(str(loc[i]))
        if field is None:
            return []
        if field is PlatformSections:
            if i + 1 == len(loc):
                return registry.names()  # a misspelt platform: the names it could be
            name = str(loc[i + 1])
            current = registry.plugin(name).section if name in registry.PLUGINS else None
            i += 2
            continue
        # a list or dict of sections: the next part is an index or a name
        i += 2 if _is_container(field) else 1
        current = _section_in(field)
    return list(_field_types(current)) if current is not None and i == len(loc) else []


def _field_types(section: type[msgspec.Struct]) -> dict[str, Any]:
    return {f.encode_name: _bare(f.type) for f in msgspec.structs.fields(section)}


def _bare(annotation: Any) -> Any:
    """The type under ``Annotated`` and ``| None``."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _bare(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _bare(rest[0]) if len(rest) == 1 else annotation
    return annotation


def _is_container(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (list, dict)


def _section_in(annotation: Any) -> type[msgspec.Struct] | None:
    """The section an annotation holds: itself, or in a list's or dict's values."""
    annotation = _bare(annotation)
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return annotation
    if _is_container(annotation):
        return _section_in(typing.get_args(annotation)[-1])
    return None
