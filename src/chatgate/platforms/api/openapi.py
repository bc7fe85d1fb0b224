"""The API's OpenAPI 3.1 document, served at ``/openapi.json``.

The request schemas are the pydantic models that validate the bodies (``bodies.py``),
so what the document promises is what the gateway checks; the responses are written
here, and ``tests/platforms/api/test_api_openapi.py`` runs schemathesis against a live
gateway to hold the two to each other.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic.json_schema import models_json_schema

from chatgate.platforms.api.bodies import ApprovalAnswer, ChatCompletionRequest, ResponseRequest

_REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def _obj(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": {**required, **optional}}


_STR, _INT = {"type": "string"}, {"type": "integer"}
_NULLABLE_STR = {"type": ["string", "null"]}
_SSE_EVENT = _obj({"data": _STR}, event=_STR)
"""One server-sent event: ``data`` is a JSON object (or ``[DONE]``), ``event`` its name when named."""
_FILES = {
    "type": "array",
    "description": "The files the agent sent with the answer (file_links.py); each link is in its text too",
    "items": _obj(
        {
            "id": _STR,
            "object": {"const": "file"},
            "filename": _STR,
            "bytes": _INT,
            "mime_type": _STR,
            "url": _STR,
        },
        caption=_STR,
    ),
}

RESPONSE_SCHEMAS: dict[str, Any] = {
    "Error": _obj(
        {"error": _obj({"message": _STR, "type": _STR, "param": _NULLABLE_STR, "code": _NULLABLE_STR})}
    ),
    "ModelList": _obj(
        {
            "object": {"const": "list"},
            "data": {
                "type": "array",
                "items": _obj({"id": _STR, "object": {"const": "model"}, "created": _INT}),
            },
        }
    ),
    "ChatCompletion": _obj(
        {
            "id": _STR,
            "object": {"const": "chat.completion"},
            "created": _INT,
            "model": _STR,
            "choices": {
                "type": "array",
                "items": _obj(
                    {"index": _INT, "message": _obj({"role": _STR, "content": _STR}), "finish_reason": _STR}
                ),
            },
        },
        chatgate_files=_FILES,
    ),
    "Response": _obj(
        {
            "id": _STR,
            "object": {"const": "response"},
            "created_at": _INT,
            "status": {"enum": ["in_progress", "completed", "failed", "cancelled"]},
            "model": _STR,
            "output": {"type": "array"},
            "previous_response_id": _NULLABLE_STR,
        },
        chatgate=_obj({}, pending_approvals={"type": "array"}),
        chatgate_files=_FILES,
    ),
    "ApprovalResult": _obj({"prompt_id": _STR, "recorded": {"type": "boolean"}}, outcome=_STR, text=_STR),
}

EXAMPLES: dict[str, Any] = {
    "ChatCompletionRequest": {"model": "chatgate", "messages": [{"role": "user", "content": "Hello!"}]},
    "ResponseRequest": {"model": "chatgate", "input": "Hello!", "conversation": "notes"},
    "ApprovalAnswer": {"option": "once"},
}
"""The request examples (with the default model name; another gateway's differs only there)."""

_ERRORS = {
    "400": (
        "Bad input: malformed JSON, wrong types, a body over platforms.api.max_body_bytes,"
        " an unknown model (the error names the field)"
    ),
    "401": "No API key, or a wrong or revoked one",
    "403": "The key may not do this (only the requester may answer an approval)",
    "404": "Not found for this API key",
    "409": "Conflict: an Idempotency-Key reused for another request, a prompt already answered",
    "429": "Too many requests are waiting for answers (platforms.api.max_waiting)",
    "503": "The store is unavailable or the gateway is stopping: retry",
    "504": "No answer within platforms.api.wait_seconds (fetch it later with GET /v1/responses/{id})",
}


def _errors(*codes: str) -> dict[str, Any]:
    error = {"content": {"application/json": {"schema": _ref("Error")}}}
    return {code: {"description": _ERRORS[code], **error} for code in codes}


def _ok(schema: str, streams: bool = False) -> dict[str, Any]:
    content: dict[str, Any] = {"application/json": {"schema": _ref(schema)}}
    if streams:
        content["text/event-stream"] = {"schema": _SSE_EVENT}
    return {
        "200": {
            "description": "OK" + (" (an SSE stream when `stream` is true)" if streams else ""),
            "content": content,
        }
    }


_HEADERS = [
    {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "minLength": 1, "maxLength": 256, "pattern": "^[^\\x00-\\x1f\\x7f]+$"},
    },
    {
        "name": "X-Chatgate-Conversation",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "minLength": 1, "maxLength": 256, "pattern": "^[^\\x00-\\x1f\\x7f]+$"},
    },
]


def _path_id(name: str) -> list[dict[str, Any]]:
    return [{"name": name, "in": "path", "required": True, "schema": {"type": "string", "maxLength": 100}}]


def _post(summary: str, body: str, ok: dict[str, Any], *codes: str, headers: bool = True) -> dict[str, Any]:
    media: dict[str, Any] = {"schema": _ref(body)}
    if body in EXAMPLES:
        media["example"] = copy.deepcopy(EXAMPLES[body])
    operation: dict[str, Any] = {
        "summary": summary,
        "requestBody": {"required": True, "content": {"application/json": media}},
        "responses": {**ok, **_errors(*codes)},
    }
    if headers:
        operation["parameters"] = _HEADERS
    return operation


def _get(summary: str, schema: str, *codes: str, path_id: str | None = None) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": summary, "responses": {**_ok(schema), **_errors(*codes)}}
    if path_id is not None:
        operation["parameters"] = _path_id(path_id)
    return operation


def _download() -> dict[str, Any]:
    binary = {"schema": {"type": "string", "format": "binary"}}
    return {
        "summary": "A file the agent sent with an answer of this key (a download, never rendered)",
        "parameters": _path_id("file_id"),
        "responses": {
            "200": {"description": "The file", "content": {"*/*": binary}},
            **_errors("401", "404", "503"),
        },
    }


_ANSWER_CODES = ("400", "401", "403", "404", "409", "429", "503", "504")


def _paths() -> dict[str, Any]:
    approval = _post(
        "Answer a tool-call approval", "ApprovalAnswer", _ok("ApprovalResult"), *_ANSWER_CODES[:5], "503"
    )
    approval["parameters"] = [*_path_id("prompt_id"), _HEADERS[0]]
    return {
        "/v1/models": {"get": _get("The model served", "ModelList", "401", "503")},
        "/v1/chat/completions": {
            "post": _post(
                "A chat completion", "ChatCompletionRequest", _ok("ChatCompletion", True), *_ANSWER_CODES
            )
        },
        "/v1/chat/completions/{completion_id}": {
            "get": _get(
                "A finished chat completion",
                "ChatCompletion",
                "401",
                "404",
                "409",
                "503",
                path_id="completion_id",
            )
        },
        "/v1/responses": {
            "post": _post("A response", "ResponseRequest", _ok("Response", True), *_ANSWER_CODES)
        },
        "/v1/responses/{response_id}": {
            "get": _get(
                "A response, finished or in progress", "Response", "401", "404", "503", path_id="response_id"
            )
        },
        "/v1/approvals/{prompt_id}": {"post": approval},
        "/v1/files/{file_id}/content": {"get": _download()},
    }


def openapi_document(model: str, profiles: tuple[str, ...] = ()) -> dict[str, Any]:
    """The document for a gateway serving ``model`` and the model ``profiles`` (the values
    ``model`` may take; a profile's name is matched in any case, which an enum cannot say)."""
    requests = [
        (ChatCompletionRequest, "validation"),
        (ResponseRequest, "validation"),
        (ApprovalAnswer, "validation"),
    ]
    _, defs = models_json_schema(requests, ref_template=_REF)  # type: ignore[arg-type]
    schemas = {**defs["$defs"], **RESPONSE_SCHEMAS}
    for name in ("ChatCompletionRequest", "ResponseRequest"):
        schemas[name]["properties"]["model"] = {"type": "string", "enum": [model, *profiles]}
    paths = _paths()
    for path in ("/v1/chat/completions", "/v1/responses"):
        paths[path]["post"]["requestBody"]["content"]["application/json"]["example"]["model"] = model
    return {
        "openapi": "3.1.0",
        "info": {"title": "chatgate OpenAI-compatible API", "version": "1", "description": "docs/api.md"},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
