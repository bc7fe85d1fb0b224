"""One check's outcome, and the line ``chatgate doctor`` prints for it."""

from __future__ import annotations

from typing import Literal

import msgspec

Status = Literal["ok", "FAIL", "skip"]


class Finding(msgspec.Struct, frozen=True):
    check: str
    """What was checked (``config``, ``platform telegram``)."""
    status: Status
    detail: str
    """What was found (on a failure: what is wrong)."""
    fix: str = ""
    """On a failure: what to do."""

    @classmethod
    def ok(cls, check: str, detail: str) -> Finding:
        return cls(check, "ok", detail)

    @classmethod
    def fail(cls, check: str, detail: str, fix: str) -> Finding:
        return cls(check, "FAIL", detail, fix)

    @classmethod
    def skip(cls, check: str, detail: str) -> Finding:
        return cls(check, "skip", detail)

    def line(self) -> str:
        """One line per check; a failure ends with its fix."""
        text = f"{self.status:<4}  {self.check:<18} {self.detail}"
        return f"{text}; fix: {self.fix}" if self.fix else text
