"""OpenAI-shaped errors: ``{"error": {"message", "type", "param", "code"}}``, each one logged."""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse

from chatgate.domain.errors import ChatgateError
from chatgate.domain.log_budget import LogBudget

log = logging.getLogger("chatgate.platforms.api")

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "server_error",
    504: "server_error",
}


class ApiError(ChatgateError):
    """A request we answer with an error; ``message`` tells the client what to do next."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.extra: dict[str, Any] = {}
        """More fields of the error object (an approval a request waits for)."""

    def body(self) -> dict[str, Any]:
        kind = _TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error")
        fields = {"message": self.message, "type": kind, "param": self.param, "code": self.code}
        return {"error": fields | self.extra}

    def response(self, lines: LogBudget | None = None) -> JSONResponse:
        """The error as a response, logged: through ``lines`` (the adapter's budget: a stranger
        sending 2,000 wrong keys a minute gets a few lines and a count, not 8.5 MiB) or, with
        none, as one line."""
        level = logging.INFO if self.status in (401, 404) else logging.WARNING
        fields = {"status": self.status, "code": self.code, "param": self.param}
        if lines is not None:
            lines.log(level, f"api: {self.code}", "api request refused: %s", self.message, extra=fields)
        else:
            log.log(level, "api request refused: %s", self.message, extra=fields)
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "invalid_api_key", message)


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} was not found for this API key")
