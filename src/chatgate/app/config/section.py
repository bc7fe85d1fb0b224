"""What every config section shares: unknown keys refused, choices in any case, env names."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from chatgate.app.config.errors import env_var_name, fold_literal_case

EnvName = Annotated[str, AfterValidator(env_var_name)]
"""A ``*_env`` key: the name of the environment variable that holds a secret, never the secret."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _any_case_choices(cls, data: Any) -> Any:
        return fold_literal_case(cls, data)
