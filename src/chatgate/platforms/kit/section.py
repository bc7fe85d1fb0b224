"""What every config section shares, the core's and each platform's: unknown keys refused,
choices in any case, ``*_env`` keys that hold a variable's name and never a secret."""

from __future__ import annotations

import typing
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator


def fold_literal_case(model: type[BaseModel], data: Any) -> Any:
    """``log_level: info`` means ``INFO``: a choice is matched whatever its case."""
    if not isinstance(data, dict):
        return data
    folded = dict(data)
    for name, field in model.model_fields.items():
        value = folded.get(name)
        if not isinstance(value, str) or typing.get_origin(field.annotation) is not typing.Literal:
            continue
        for choice in typing.get_args(field.annotation):
            if isinstance(choice, str) and choice.casefold() == value.casefold():
                folded[name] = choice
    return folded


def env_var_name(value: str | None) -> str | None:
    """A ``*_env`` key holds the *name* of a variable; a pasted secret is refused, never echoed."""
    if value is None:
        return None
    name = value.strip()
    looks_like_a_name = (
        bool(name) and (name[0].isalpha() or name[0] == "_") and name.replace("_", "").isalnum()
    )
    if not looks_like_a_name or (len(name) >= 32 and "_" not in name):
        raise ValueError(
            "this must be the name of an environment variable (like MY_SECRET_TOKEN), and what is"
            " here is not one; if you pasted the secret itself, remove it from the file, put it in a"
            " variable (export MY_SECRET_TOKEN=...) and give that variable's name here"
        )
    return name


EnvName = Annotated[str, AfterValidator(env_var_name)]
"""A ``*_env`` key: the name of the environment variable that holds a secret, never the secret."""


class Section(BaseModel):
    """A block of the config file: unknown keys are mistakes, choices match in any case."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _any_case_choices(cls, data: Any) -> Any:
        return fold_literal_case(cls, data)


class PlatformSection(Section):
    """``platforms.<name>``: a platform's own keys, validated by its plugin's model."""

    enabled: bool = False
