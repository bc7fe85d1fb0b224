"""What every config section shares, the core's and each platform's: unknown keys refused,
choices in any case, ``*_env`` keys that hold a variable's name and never a secret.

A section is a ``msgspec.Struct``; ``conform.py`` builds one from the YAML's data and says
what is wrong with every key at once. A key's own rule is ``Annotated[T, Check(fn)]``; a rule
over several keys is the section's ``__post_init__`` (a ``ValueError`` names the section).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar

import msgspec


class Check:
    """``Annotated`` metadata: ``fn`` gets the key's converted value and returns the value to
    keep; its ``ValueError`` is reported at that key."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"Check({getattr(self.fn, '__name__', self.fn)!r})"


def env_var_name(value: str) -> str:
    """A ``*_env`` key holds the *name* of a variable; a pasted secret is refused, never echoed."""
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


EnvName = Annotated[str, Check(env_var_name)]
"""A ``*_env`` key: the name of the environment variable that holds a secret, never the secret."""


class Section(msgspec.Struct, kw_only=True):
    """A block of the config file: unknown keys are mistakes, choices match in any case.

    Build one from a file's data with ``conform(Section, data)``; calling the class is for
    code that already holds valid values (defaults, tests), and runs only ``__post_init__``."""

    numbers_as_text: ClassVar[bool] = False
    """A number written where text is expected is taken as that text (ids: ``allow_users: [42]``)."""

    @classmethod
    def before(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The section's raw keys before they are checked: a default that depends on another key."""
        return data


class PlatformSection(Section, kw_only=True):
    """``platforms.<name>``: a platform's own keys, validated by its plugin's section."""

    enabled: bool = False
