"""OpenAI-shaped errors: ``{"error": {"message", "type", "param", "code"}}``, each one logged."""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse

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


class ApiError(Exception):
    """A request we answer with an error; ``message`` tells the client what to do next."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param

    def body(self) -> dict[str, Any]:
        kind = _TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        level = logging.INFO if self.status in (401, 404) else logging.WARNING
        log.log(
            level,
            "api request refused: %s",
            self.message,
            extra={"status": self.status, "code": self.code, "param": self.param},
        )
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "invalid_api_key", message)


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} was not found for this API key")
