"""The conversation list without accounts (loopback, or a shared token): each browser's own
conversations, renamed, deleted and exported, over real HTTP and sockets to a real gateway."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import httpx
import pytest

from support.web_harness import StartGateway, WebClient, of_type, web_config

Connect = Callable[[int], Awaitable[WebClient]]
ANN = {"X-Chatgate-User": "user-ann"}
BOB = {"X-Chatgate-User": "user-bob"}


def _change(port: int, who: dict[str, str]) -> dict[str, str]:
    return {**who, "Origin": f"http://127.0.0.1:{port}", "Content-Type": "application/json"}


async def test_each_browser_lists_its_own_conversations_and_renames_deletes_and_exports_them(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    port = gateway.port
    assert port is not None
    ann = await connect_client(port)
    await ann.hello("c-ann-1", "user-ann")
    await ann.ask("m1", "how do leases work")
    await ann.hello("c-ann-2", "user-ann")  # New: another conversation, the first one kept
    await ann.ask("m2", "second *topic*")
    bob = await connect_client(port)
    await bob.hello("c-bob", "user-bob")
    await bob.ask("m3", "bob's question")

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        listed = (await http.get("/api/conversations", headers=ANN)).json()["conversations"]
        assert [(c["id"], c["title"]) for c in listed] == [
            ("c-ann-2", "second *topic*"),
            ("c-ann-1", "how do leases work"),
        ]
        found = (await http.get("/api/conversations?q=LEASES", headers=ANN)).json()["conversations"]
        assert [c["id"] for c in found] == ["c-ann-1"]
        assert [
            c["id"] for c in (await http.get("/api/conversations", headers=BOB)).json()["conversations"]
        ] == ["c-bob"]
        assert (await http.get("/api/conversations/c-bob/messages", headers=ANN)).status_code == 403

        renamed = await http.post(
            "/api/conversations/c-ann-1/title", headers=_change(port, ANN), json={"title": "Leases"}
        )
        assert renamed.json() == {"id": "c-ann-1", "title": "Leases"}

        md = await http.get("/api/conversations/c-ann-1/export?format=md", headers=ANN)
        assert md.headers["content-disposition"] == 'attachment; filename="conversation-c-ann-1.md"'
        assert md.text.startswith("# Leases\n")
        assert "## You · " in md.text and "how do leases work" in md.text
        assert "## Assistant · " in md.text and "echo: how do leases work" in md.text
        doc = json.loads((await http.get("/api/conversations/c-ann-1/export?format=json", headers=ANN)).text)
        assert doc["title"] == "Leases"
        assert [(i["kind"], i["text"]) for i in doc["items"]] == [
            ("me", "how do leases work"),
            ("bot", "echo: how do leases work"),
        ]

        deleted = await http.post("/api/conversations/c-ann-1/delete", headers=_change(port, ANN), json={})
        assert deleted.json() == {"id": "c-ann-1", "deleted": True}
        listed = (await http.get("/api/conversations", headers=ANN)).json()["conversations"]
        assert [c["id"] for c in listed] == ["c-ann-2"]
        gone = await http.get("/api/conversations/c-ann-1/messages", headers=ANN)
        assert gone.status_code == 404 and gone.json()["error"] == "not_found"

    again = await connect_client(port)  # a deleted conversation is not served again
    await again.send({"type": "hello", "chat_id": "c-ann-1", "user_id": "user-ann", "user_name": "ann"})
    refusal = await again.recv()
    assert refusal["type"] == "error" and refusal["code"] == "not_found"


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({}, 400, "invalid_request"),  # no user id
        ({"X-Chatgate-User": "!deleted"}, 400, "invalid_request"),  # never the deleted chats' owner
        ({**ANN, "Origin": "http://evil.example"}, 403, "cross_origin"),
        ({**ANN, "Host": "rebound.example:8765"}, 403, "cross_origin"),  # DNS rebinding
    ],
)
async def test_reads_without_accounts_need_the_browsers_id_from_this_gateways_own_page(
    start_gateway: StartGateway, headers: dict[str, str], status: int, code: str
) -> None:
    gateway = await start_gateway()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}") as http:
        answer = await http.get("/api/conversations", headers=headers)
    assert (answer.status_code, answer.json()["error"]) == (status, code)


async def test_changes_need_an_origin_and_a_shared_token_guards_the_list(
    start_gateway: StartGateway, connect_client: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEB_TOKEN", "s3cret")
    gateway = await start_gateway(web_config(platforms={"web": {"access_token_env": "WEB_TOKEN"}}))
    port = gateway.port
    assert port is not None
    ann = await connect_client(port)
    await ann.hello("c-ann", "user-ann", token="s3cret")
    assert of_type(await ann.ask("m1", "hello"), "final")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        refused = await http.get("/api/conversations", headers=ANN)
        assert (refused.status_code, refused.json()["error"]) == (401, "unauthorized")
        wrong = await http.get("/api/conversations", headers={**ANN, "X-Chatgate-Token": "nope"})
        assert wrong.status_code == 401
        with_token = {**ANN, "X-Chatgate-Token": "s3cret"}
        listed = (await http.get("/api/conversations", headers=with_token)).json()["conversations"]
        assert [c["id"] for c in listed] == ["c-ann"]
        no_origin = await http.post("/api/conversations/c-ann/delete", headers=with_token, json={})
        assert (no_origin.status_code, no_origin.json()["error"]) == (403, "origin_required")
        assert [
            c["id"]
            for c in (await http.get("/api/conversations", headers=with_token)).json()["conversations"]
        ]


async def test_a_browser_at_its_conversation_bound_is_told_to_delete_one_and_then_may_start_another(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway(web_config(platforms={"web": {"max_conversations_per_user": 2}}))
    port = gateway.port
    assert port is not None
    ann = await connect_client(port)
    await ann.hello("c1", "user-ann")
    await ann.ask("m1", "first")
    await ann.hello("c2", "user-ann")
    await ann.ask("m2", "second")
    third = await connect_client(port)
    await third.send({"type": "hello", "chat_id": "c3", "user_id": "user-ann", "user_name": "ann"})
    refusal = await third.recv()
    assert refusal["type"] == "error" and refusal["code"] == "too_many_conversations"
    assert "delete some" in refusal["message"]
    bob = await connect_client(port)
    await bob.hello("c-bob", "user-bob")  # the bound is per user
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        deleted = await http.post("/api/conversations/c1/delete", headers=_change(port, ANN), json={})
        assert deleted.json() == {"id": "c1", "deleted": True}
    await ann.hello("c3", "user-ann")
    await ann.ask("m3", "third, after a delete")
