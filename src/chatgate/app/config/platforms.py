"""The ``platforms`` section: one section per platform, each validated by its plugin's model.

Only the sections the config names (and those on by default) are loaded, so a config
that uses Telegram imports the Telegram plugin and no other. A name that is not a
platform is an unknown key like any other: reported with its line and the nearest name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chatgate.app import registry
from chatgate.platforms.kit.conform import BAD, KeyPath, Problem, conform, conform_at, is_bad
from chatgate.platforms.kit.section import PlatformSection


class PlatformSections:
    """``config.platforms``: the validated section of each configured platform, by name."""

    def __init__(self, sections: dict[str, PlatformSection]) -> None:
        self._sections = sections

    def __getattr__(self, name: str) -> PlatformSection:
        """``config.platforms.web``: a configured section, or the plugin's defaults (disabled)."""
        if name.startswith("_") or name not in registry.PLUGINS:
            raise AttributeError(f"no platform {name!r}")
        sections = self.__dict__["_sections"]
        if name not in sections:
            sections[name] = registry.plugin(name).section()
        return sections[name]  # type: ignore[no-any-return]

    def get(self, name: str) -> PlatformSection | None:
        """The section if the config has it (named, or on by default)."""
        return self._sections.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._sections))

    def enabled(self) -> list[tuple[str, PlatformSection]]:
        """The enabled sections, in the registry's order."""
        order = {name: i for i, name in enumerate(registry.names())}
        found = [(n, s) for n, s in self._sections.items() if s.enabled]
        return sorted(found, key=lambda item: order.get(item[0], len(order)))

    def __repr__(self) -> str:
        return f"PlatformSections({self._sections!r})"

    @classmethod
    def conform(cls, data: Any, path: KeyPath, problems: list[Problem]) -> Any:
        """Each named platform's section by its plugin's class; a name that is not one is unknown."""
        if isinstance(data, PlatformSections):
            return data
        if data is None:
            data = {}
        if not isinstance(data, dict):
            problems.append(Problem(path, "must be a mapping of platform sections (web:, telegram:, ...)"))
            return BAD
        sections: dict[str, PlatformSection] = {}
        ok = True
        for name, raw in data.items():
            if name not in registry.PLUGINS:
                problems.append(Problem((*path, str(name)), "unknown key", unknown=True))
                ok = False
                continue
            sections[name] = conform_at(registry.plugin(name).section, raw, (*path, name), problems)
            ok = ok and not is_bad(sections[name])
        if not ok:
            return BAD
        for name in registry.ON_BY_DEFAULT:
            sections.setdefault(name, registry.plugin(name).section())
        return cls(sections)

    @classmethod
    def validate(cls, data: Any) -> PlatformSections:
        """The sections of ``data`` (``Invalid`` when it is not valid): a config built in code."""
        return conform(cls, data)
