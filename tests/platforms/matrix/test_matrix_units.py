"""The Matrix adapter's pure parts: decoding events (who, where, whether for the bot), reaction
prompts, the homeserver's errors as delivery results, the section's rules and a cheap plugin."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from chatgate.domain.errors import ConfigError, MaybeSent, NotSent
from chatgate.domain.outbound import Ambiguous, Rejected, RetryLater
from chatgate.domain.prompts import Prompt, PromptOption
from chatgate.platforms.kit.conform import conform
from chatgate.platforms.kit.plugin import CoreView
from chatgate.platforms.kit.skipped import Skipped
from chatgate.platforms.matrix.api import error_of, path, retry_after
from chatgate.platforms.matrix.decode import Addressing, Bad, RoomInfo, decode_message
from chatgate.platforms.matrix.errors import ApiRefused, RateLimited
from chatgate.platforms.matrix.outbound import classify, relates_to
from chatgate.platforms.matrix.plugin import PLUGIN
from chatgate.platforms.matrix.prompts import PROMPT_KEY, decode_reaction, prompt_content, prompt_ref
from chatgate.platforms.matrix.section import MatrixSection

BOT = "@bot:example.org"
RULES = Addressing(BOT, "Helper")
DM = RoomInfo("!dm:example.org", members=2)
ROOM = RoomInfo("!room:example.org", members=5, name="Planning", topic="Q3")


def message(body: str, **content: Any) -> dict[str, Any]:
    return {
        "event_id": "$e1", "sender": "@ann:example.org", "type": "m.room.message",
        "content": {"msgtype": "m.text", "body": body, **content},
    }  # fmt: skip


def test_a_dm_is_a_dm_and_every_message_in_it_is_for_the_bot() -> None:
    found = decode_message(message("hi"), DM, RULES)
    assert not isinstance(found, Skipped | Bad)
    assert found.source.chat_type == "dm" and found.source.chat_id == DM.room_id
    assert found.delivery_id == "!dm:example.org/$e1" and found.message_ref == "$e1"
    assert found.source.chat_name is None


def test_in_a_room_only_a_mention_a_command_or_a_reply_to_the_bot_is_for_it() -> None:
    assert isinstance(decode_message(message("lunch?"), ROOM, RULES), Skipped)
    pill = decode_message(message("Helper: lunch?", **{"m.mentions": {"user_ids": [BOT]}}), ROOM, RULES)
    assert not isinstance(pill, Skipped | Bad) and pill.text == "lunch?"
    assert pill.source.chat_type == "group" and pill.source.chat_name == "Planning"
    command = decode_message(message("/approve"), ROOM, RULES)
    assert not isinstance(command, Skipped | Bad) and command.text == "/approve"
    reply = message(
        "> <@bot:example.org> earlier\n\nyes please",
        **{"m.relates_to": {"m.in_reply_to": {"event_id": "$b"}}},
    )
    found = decode_message(reply, ROOM, RULES, to_bot=True)
    assert not isinstance(found, Skipped | Bad) and found.text == "yes please" and found.reply_to == "$b"
    free = Addressing(BOT, None, True, frozenset({ROOM.room_id}))
    assert not isinstance(decode_message(message("lunch?"), ROOM, free), Skipped)


def test_a_thread_message_is_its_own_session_under_its_room() -> None:
    thread = {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True}
    body = message(f"{BOT} go", **{"m.relates_to": {**thread, "m.in_reply_to": {"event_id": "$root"}}})
    found = decode_message(body, ROOM, RULES)
    assert not isinstance(found, Skipped | Bad)
    assert (found.source.chat_type, found.source.thread_id, found.source.parent_chat_id) == (
        "thread",
        "$root",
        ROOM.room_id,
    )
    assert found.reply_to is None, "a thread's fallback is not a reply"
    assert found.text == "go"


def test_notices_own_messages_and_bad_events_are_never_answered() -> None:
    assert isinstance(decode_message(message("x", msgtype="m.notice"), DM, RULES), Skipped)
    own = {**message("x"), "sender": BOT}
    assert isinstance(decode_message(own, DM, RULES), Skipped)
    assert isinstance(decode_message({"event_id": "$e", "content": {}}, DM, RULES), Bad)
    huge = decode_message(message("x" * 40_000), DM, RULES)
    assert isinstance(huge, Bad) and "limit" in huge.reason


def test_an_edit_is_an_event_of_its_own_that_names_what_it_edits() -> None:
    edit = message("* fixed", **{"m.new_content": {"msgtype": "m.text", "body": "fixed"},
                                 "m.relates_to": {"rel_type": "m.replace", "event_id": "$orig"}})  # fmt: skip
    found = decode_message(edit, DM, RULES, edited_thread="$root")
    assert not isinstance(found, Skipped | Bad)
    assert found.text == "fixed" and found.payload["edit_of"] == "$orig" and found.message_ref == "$orig"
    assert found.source.thread_id == "$root"


def test_a_prompt_carries_its_answers_and_a_reaction_on_it_is_a_button_press() -> None:
    options = (PromptOption("once", "Approve once"), PromptOption("deny", "Deny"))
    prompt = Prompt("p1.abcdef12", "Answer with a button below.", options)
    content = prompt_content(prompt, prompt.text, None)
    assert "reaction below" in content["body"] and content[PROMPT_KEY]["prompt_id"] == "p1.abcdef12"
    ref = prompt_ref({"sender": BOT, "content": content}, BOT)
    assert ref is not None and ref.options == {"✅": "once", "❌": "deny"}
    assert prompt_ref({"sender": "@mallory:example.org", "content": content}, BOT) is None, (
        "only the bot's prompts"
    )
    on_prompt = {"rel_type": "m.annotation", "event_id": "$p", "key": "✅\ufe0f"}
    tap = {"event_id": "$r", "sender": "@ann:example.org", "type": "m.reaction",
           "content": {"m.relates_to": on_prompt}}  # fmt: skip
    found = decode_reaction(tap, DM, ref, sender_name=None, received_at=0.0)
    assert not isinstance(found, Skipped)
    assert found.kind == "button" and found.message_ref == "$p" and found.action_id == "$r"
    assert found.payload["prompt_response"] == {"prompt_id": "p1.abcdef12", "option_id": "once"}
    other = {**tap, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$p", "key": "🎉"}}}
    assert isinstance(decode_reaction(other, DM, ref, sender_name=None, received_at=0.0), Skipped)


def test_the_homeservers_errors_become_honest_delivery_results() -> None:
    limited = error_of(
        "PUT /send", 429, b'{"errcode":"M_LIMIT_EXCEEDED","error":"slow","retry_after_ms":2500}', None
    )
    assert isinstance(limited, RateLimited) and limited.retry_after == 2.5
    assert retry_after({}, "7") == 7.0 and retry_after({}, None) == 1.0
    result = classify(limited, sending=True)
    assert isinstance(result, RetryLater) and result.retry_after == 2.5 and result.scope == "platform"
    assert isinstance(classify(ApiRefused("x", 403, "M_FORBIDDEN", "no"), sending=True), Rejected)
    token = classify(ApiRefused("x", 401, "M_UNKNOWN_TOKEN", "no"), sending=True)
    assert isinstance(token, RetryLater) and "token" in token.reason
    assert isinstance(classify(MaybeSent("timeout"), sending=True), Ambiguous)
    assert isinstance(classify(MaybeSent("timeout"), sending=False), RetryLater)
    assert isinstance(classify(NotSent("refused"), sending=True), RetryLater)
    garbage = error_of("GET /sync", 502, b"<html>", None)
    assert garbage.status == 502 and garbage.errcode == "HTTP_502"
    assert path("rooms", "!a:b", "send", "m.room.message", "t1") == (
        "/_matrix/client/v3/rooms/%21a%3Ab/send/m.room.message/t1"
    )


def test_a_reply_in_a_thread_stays_in_the_thread() -> None:
    assert relates_to({"thread_id": "$root"}, "$q") == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": False,
        "m.in_reply_to": {"event_id": "$q"},
    }
    assert relates_to({}, "$q") == {"m.in_reply_to": {"event_id": "$q"}}
    assert relates_to({}, None) is None


def test_the_section_needs_a_homeserver_and_a_secret_that_is_set() -> None:
    core = CoreView()
    section = MatrixSection(enabled=True, access_token_env="MX_TOKEN")
    with pytest.raises(ConfigError, match="homeserver"):
        PLUGIN.check(section, {"MX_TOKEN": "t"}, core)
    section = MatrixSection(enabled=True, homeserver="https://m.example.org", access_token_env="MX_TOKEN")
    with pytest.raises(ConfigError, match="MX_TOKEN is not set"):
        PLUGIN.check(section, {}, core)
    PLUGIN.check(section, {"MX_TOKEN": "t"}, core)
    with pytest.raises(ValueError, match="user_id is required"):
        MatrixSection(enabled=True, homeserver="https://m.example.org", password_env="MX_PASSWORD")
    with pytest.raises(ValueError, match="name of an environment variable"):
        conform(MatrixSection, {"access_token_env": "syt_YWxpY2U_dDBdmrlhOZSBRAzbqfcS_3KrD6i"})
    access = PLUGIN.access(MatrixSection(allow_users=["@ann:example.org"], pairing=True), core)
    assert access["matrix"].allow_users == frozenset({"@ann:example.org"}) and access["matrix"].pairing


def test_the_plugin_module_is_cheap_to_import() -> None:
    code = (
        "import sys, chatgate.platforms.matrix.plugin\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'mautrix', 'nio')"
        " or m.startswith('chatgate.platforms.matrix.adapter')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


async def test_an_answer_is_read_whole_across_chunks_and_refused_past_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from chatgate.platforms.matrix import api

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        size = int(request.query["n"])
        await response.write(b'{"pad":"')
        for _ in range(size // 100):
            await response.write(b"x" * 100)
        await response.write(b'"}')
        return response

    app = web.Application()
    app.router.add_get("/_matrix/client/v3/sync", chunked)
    monkeypatch.setattr(api, "MAX_ANSWER_BYTES", 50_000)
    async with TestServer(app, host="127.0.0.1") as server:
        client = api.MatrixApi(str(server.make_url("")))
        try:
            whole = await client.call("GET", api.path("sync"), query={"n": "40000"})
            assert len(whole["pad"]) == 40_000, "every chunk read, not the first"
            with pytest.raises(MaybeSent, match="larger than"):
                await client.call("GET", api.path("sync"), query={"n": "60000"})
        finally:
            await client.aclose()


async def test_the_upload_limit_is_read_from_either_media_config_and_none_when_not_told() -> None:
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from chatgate.platforms.matrix import api

    told: dict[str, Any] = {}

    async def refused(request: web.Request) -> web.Response:
        return web.json_response({"errcode": "M_UNRECOGNIZED", "error": "no"}, status=404)

    async def legacy(request: web.Request) -> web.Response:
        return web.json_response(told)

    app = web.Application()
    app.router.add_get("/_matrix/client/v1/media/config", refused)  # before authenticated media
    app.router.add_get("/_matrix/media/v3/config", legacy)
    async with TestServer(app, host="127.0.0.1") as server:
        client = api.MatrixApi(str(server.make_url("")), "token")
        try:
            told["m.upload.size"] = 10_485_760
            assert await client.upload_limit() == 10_485_760
            del told["m.upload.size"]  # no limit said: the adapter keeps its default
            assert await client.upload_limit() is None
            told["m.upload.size"] = "big"
            assert await client.upload_limit() is None
        finally:
            await client.aclose()


def _image(fmt: str, width: int, height: int) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(out, fmt)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
async def test_an_images_width_and_height_come_from_its_head_read_in_small_pieces(fmt: str) -> None:
    from chatgate.domain.media import BlobStream, FileBody
    from chatgate.platforms.matrix.dimensions import dimensions_of, image_dimensions

    data = _image(fmt, 321, 123)
    opened = 0

    async def pieces() -> Any:
        for at in range(0, len(data), 7):  # a head split over many pieces
            yield data[at : at + 7]

    async def reopen() -> BlobStream:
        nonlocal opened
        opened += 1
        return BlobStream(len(data), pieces())

    body = FileBody(BlobStream(len(data), pieces()), reopen)
    assert await image_dimensions(body) == (321, 123)
    assert b"".join([p async for p in body.pieces()]) == data  # the upload reads it afresh
    assert opened == 1
    assert dimensions_of(data[:12]) is None  # cut short before the size
    assert dimensions_of(b"%PDF-1.4 not an image") is None
