"""The ``platforms`` section: one section per platform, each validated by its plugin's model.

Only the sections the config names (and those on by default) are loaded, so a config
that uses Telegram imports the Telegram plugin and no other. A name that is not a
platform is an unknown key like any other: reported with its line and the nearest name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ConfigDict, GetCoreSchemaHandler, create_model
from pydantic_core import core_schema

from chatgate.app import registry
from chatgate.platforms.kit.section import PlatformSection

_MODELS: dict[tuple[str, ...], Any] = {}


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
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(cls.validate)

    @classmethod
    def validate(cls, data: Any) -> PlatformSections:
        if isinstance(data, PlatformSections):
            return data
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError("must be a mapping of platform sections (web:, telegram:, ...)")
        names = [n for n in data if n in registry.PLUGINS]
        names += [n for n in registry.ON_BY_DEFAULT if n not in names]
        model = _model_for(tuple(names))
        validated = model.model_validate(data)  # an unknown name is extra_forbidden, at its line
        return cls({name: getattr(validated, name) for name in names})


def _model_for(names: tuple[str, ...]) -> Any:
    """A pydantic model whose fields are these platforms' sections (built once per set of names)."""
    model = _MODELS.get(names)
    if model is None:
        fields: dict[str, Any] = {}
        for name in names:
            section = registry.plugin(name).section
            fields[name] = (section, section())
        model = create_model("platforms", __config__=ConfigDict(extra="forbid"), **fields)
        _MODELS[names] = model
    return model
