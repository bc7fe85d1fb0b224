"""``POST /v1/approvals/{prompt_id}``: the key's owner answers a tool-call prompt.

The answer is an ``Inbound`` of kind ``button`` in the prompt's chat, admitted like a
tap in the web chat: resolved inside the admission transaction by the approvals engine,
which lets only the requester (the key that sent the message) or a configured approver
answer. A prompt of another key's chat is as absent as an unknown one.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import Inbound
from chatgate.domain.prompts import PROMPT_ID_RE, prompt_token
from chatgate.domain.source import Source
from chatgate.platforms.api.adapter import PLATFORM, ApiAdapter
from chatgate.platforms.api.asks import IDEMPOTENCY_HEADER
from chatgate.platforms.api.bodies import ApprovalAnswer, parse, read_json
from chatgate.platforms.api.errors import ApiError, not_found
from chatgate.platforms.api.lane import delivery_id_for


async def answer(adapter: ApiAdapter, request: Request) -> Response:
    key = await adapter.authenticate(request)
    prompt_id = request.path_params["prompt_id"]
    body = parse(ApprovalAnswer, await read_json(request, adapter.settings.max_body_bytes))
    if not PROMPT_ID_RE.fullmatch(prompt_id):
        raise not_found(f"approval {prompt_id[:60]!r}")
    try:
        record = await adapter.store.get_approval(prompt_id)
    except StoreUnavailable as exc:
        raise ApiError(503, "storage_unavailable", f"cannot read the approval now ({exc}); retry") from exc
    if record is None or record.platform != PLATFORM or not record.chat_id.startswith(f"{key.key_id}/"):
        raise not_found(f"approval {prompt_id}")
    idem = request.headers.get(IDEMPOTENCY_HEADER)
    delivery_id = "approval:" + delivery_id_for(key.key_id, f"{prompt_id}\0{idem}" if idem else None)
    inbound = Inbound(
        transport=PLATFORM,
        delivery_id=delivery_id,
        source=Source(
            platform=PLATFORM, chat_id=record.chat_id, chat_type="dm", user_id=key.key_id, user_name=key.name
        ),
        text=prompt_token(prompt_id, body.option),
        kind="button",
        action_id=delivery_id,
        message_ref=prompt_id,
        received_at=time.time(),
        payload={"prompt_response": {"prompt_id": prompt_id, "option_id": body.option}},
        observes_labels=False,
    )
    admitted = await adapter.submit(inbound)
    feedback = admitted.answer
    if feedback is None:  # a retry with the same Idempotency-Key: the first one was recorded
        return JSONResponse({"prompt_id": prompt_id, "recorded": True, "duplicate": True})
    if not feedback.won:
        raise ApiError(409, "already_resolved", feedback.text)
    return JSONResponse(
        {"prompt_id": prompt_id, "recorded": True, "outcome": feedback.outcome, "text": feedback.text}
    )
