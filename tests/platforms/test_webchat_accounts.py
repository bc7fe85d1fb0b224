"""Accounts on the web chat over real HTTP and WebSockets against an in-process gateway on
127.0.0.1: sign-in, the cookie, each refusal (Origin, CSRF, rate limit, no session), per-user
chats (list, history and hello all refuse another user's chat), the signed-in identity as the
approval identity, and revocation closing an open socket."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from msgspec.structs import replace
from websockets.exceptions import ConnectionClosed, InvalidStatus

from chatgate.store.sqlite import SqliteStore
from support.accounts_harness import accounts_config, origin, seed, sign_in, socket
from support.web_harness import StartGateway, of_type, web_config


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "accounts.db"


async def _closed_code(client) -> int | None:
    """Read until the server closes the socket; its close code."""
    with pytest.raises(ConnectionClosed):
        while True:
            await client.recv()
    return client.ws.close_code


async def test_a_token_signs_in_with_an_httponly_strict_cookie_and_the_page_then_loads(
    db: Path, start_gateway: StartGateway
) -> None:
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    async with httpx.AsyncClient(base_url=origin(gateway.port)) as anon:
        page = await anon.get("/")
        assert page.status_code == 303 and page.headers["location"] == "/signin"
        signin = await anon.get("/signin")
        assert signin.status_code == 200 and "script-src 'self'" in signin.headers["content-security-policy"]
        res = await anon.post(
            "/api/signin", json={"token": users["ann"].token}, headers={"Origin": origin(gateway.port)}
        )
        assert res.status_code == 200 and res.json()["name"] == "ann" and res.json()["role"] == "user"
        cookie = res.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        assert "secure" not in cookie  # plain http on loopback
        assert users["ann"].token not in res.headers["set-cookie"]
        chat = await anon.get("/")
        assert chat.status_code == 200 and 'data-auth="accounts"' in chat.text
        me = await anon.get("/api/me")
        assert me.json()["csrf"] == res.json()["csrf"]


async def test_a_password_signs_in_and_a_wrong_one_or_an_unknown_token_does_not(
    db: Path, start_gateway: StartGateway
) -> None:
    await seed(db, ("ann", "user"), password={"ann": "correct horse"})
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    ok = await sign_in(gateway.port, {"name": "Ann", "password": "correct horse"})
    assert ok.name == "ann"
    await ok.http.aclose()
    async with httpx.AsyncClient(base_url=origin(gateway.port)) as anon:
        own = {"Origin": origin(gateway.port)}
        for body in (
            {"name": "ann", "password": "wrong"},
            {"name": "nobody", "password": "correct horse"},
            {"token": "cgu-000000000000-" + "A" * 43},
            {"token": "not a token"},
        ):
            res = await anon.post("/api/signin", json=body, headers=own)
            assert res.status_code == 401 and res.json()["error"] == "sign_in_failed", body
            assert "chatgate_session" not in anon.cookies
        bad = await anon.post(
            "/api/signin", content=b"{", headers={**own, "Content-Type": "application/json"}
        )
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_json"


async def test_sign_in_from_another_origin_or_without_one_is_refused(
    db: Path, start_gateway: StartGateway
) -> None:
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    async with httpx.AsyncClient(base_url=origin(gateway.port)) as anon:
        body = {"token": users["ann"].token}
        foreign = await anon.post("/api/signin", json=body, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and foreign.json()["error"] == "cross_origin"
        missing = await anon.post("/api/signin", json=body)
        assert missing.status_code == 403 and missing.json()["error"] == "origin_required"
        assert "chatgate_session" not in anon.cookies


async def test_sign_in_attempts_are_limited_per_client(db: Path, start_gateway: StartGateway) -> None:
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(sign_in_attempts_per_minute=3), store=SqliteStore(db))
    async with httpx.AsyncClient(base_url=origin(gateway.port)) as anon:
        own = {"Origin": origin(gateway.port)}
        for _ in range(3):
            res = await anon.post("/api/signin", json={"name": "ann", "password": "guess"}, headers=own)
            assert res.status_code == 401
        limited = await anon.post("/api/signin", json={"token": users["ann"].token}, headers=own)
        assert limited.status_code == 429 and limited.json()["error"] == "too_many_attempts"
        assert int(limited.headers["retry-after"]) >= 1
        assert "chatgate_session" not in anon.cookies  # even the right token waits


async def test_a_change_without_the_csrf_token_or_from_another_origin_is_refused(
    db: Path, start_gateway: StartGateway
) -> None:
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    ann = await sign_in(gateway.port, {"token": users["ann"].token})
    try:
        no_token = await ann.http.post("/api/signout", json={}, headers={"Origin": origin(gateway.port)})
        assert no_token.status_code == 403 and no_token.json()["error"] == "csrf"
        wrong = await ann.post("/api/signout", **{"X-CSRF-Token": "0" * 64})
        assert wrong.status_code == 403 and wrong.json()["error"] == "csrf"
        foreign = await ann.post("/api/signout", Origin="http://evil.example")
        assert foreign.status_code == 403 and foreign.json()["error"] == "cross_origin"
        assert (await ann.http.get("/api/me")).status_code == 200, "still signed in after the refusals"
        done = await ann.post("/api/signout")
        assert done.status_code == 200
        ann.http.cookies.set("chatgate_session", ann.cookie)  # a copy of the cookie kept by an attacker
        assert (await ann.http.get("/api/me")).status_code == 401
    finally:
        await ann.http.aclose()


async def test_the_socket_needs_the_session_cookie_and_this_gateways_origin(
    db: Path, start_gateway: StartGateway
) -> None:
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    ann = await sign_in(gateway.port, {"token": users["ann"].token})
    await ann.http.aclose()
    anonymous = await socket(gateway.port, None)
    assert await _closed_code(anonymous) == 4401
    forged = await socket(gateway.port, "cgs-000000000000-" + "A" * 43)
    assert await _closed_code(forged) == 4401
    for other in ("http://evil.example", None):
        with pytest.raises(InvalidStatus) as refused:
            await socket(gateway.port, ann.cookie, with_origin=other)
        assert refused.value.response.status_code == 403
    good = await socket(gateway.port, ann.cookie)
    await good.hello("c-ann")
    await good.close()


async def test_two_users_cannot_see_or_open_each_others_chats(
    db: Path, start_gateway: StartGateway, caplog: pytest.LogCaptureFixture
) -> None:
    users = await seed(db, ("ann", "user"), ("bob", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    ann = await sign_in(gateway.port, {"token": users["ann"].token})
    bob = await sign_in(gateway.port, {"token": users["bob"].token})
    try:
        ann_ws = await socket(gateway.port, ann.cookie)
        await ann_ws.hello("c-ann", user_id="bob")  # the hello's user id is not trusted
        frames = await ann_ws.ask("m1", "the secret plan")
        assert of_type(frames, "final")[-1]["text"] == "echo: the secret plan"
        source = await gateway.store.session_source("agent:main:web:dm:c-ann")
        assert (
            source is not None
            and source.user_id == users["ann"].account.user_id
            and source.user_name == "ann"
        )

        listed = (await ann.http.get("/api/conversations")).json()["conversations"]
        assert [(c["id"], c["title"]) for c in listed] == [("c-ann", "the secret plan")]
        assert (await bob.http.get("/api/conversations")).json()["conversations"] == []
        assert (await bob.http.get("/api/conversations?q=secret")).json()["conversations"] == []
        history = await bob.http.get("/api/conversations/c-ann/messages")
        assert history.status_code == 403 and history.json()["error"] == "forbidden"
        rename = await bob.post("/api/conversations/c-ann/title", {"title": "mine now"})
        assert rename.status_code == 403

        bob_ws = await socket(gateway.port, bob.cookie)
        await bob_ws.send({"type": "hello", "chat_id": "c-ann", "user_id": users["ann"].account.user_id})
        refusal = await bob_ws.recv()
        assert refusal["type"] == "error" and refusal["code"] == "forbidden"
        assert "bob tried to open chat c-ann of another user" in caplog.text
        assert "bob asked for conversation c-ann of another user" in caplog.text
        await bob_ws.message("m2", "let me in")
        assert (await bob_ws.recv())["code"] == "not_ready"  # nothing was admitted into ann's chat
        own = (await ann.http.get("/api/conversations/c-ann/messages")).json()["items"]
        assert [(i["kind"], i["text"]) for i in own] == [
            ("me", "the secret plan"),
            ("bot", "echo: the secret plan"),
        ]
        await ann_ws.close()
        await bob_ws.close()
    finally:
        await ann.http.aclose()
        await bob.http.aclose()


async def test_history_is_paged_and_search_finds_message_text(db: Path, start_gateway: StartGateway) -> None:
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    ann = await sign_in(gateway.port, {"token": users["ann"].token})
    try:
        ws = await socket(gateway.port, ann.cookie)
        await ws.hello("c1")
        for i in range(3):
            await ws.ask(f"m{i}", f"note {i} about zebras" if i == 1 else f"note {i}")
        await ws.hello("c2")
        await ws.ask("m9", "unrelated")
        page = (await ann.http.get("/api/conversations/c1/messages?limit=4")).json()
        assert [i["text"] for i in page["items"]] == [
            "note 1 about zebras",
            "echo: note 1 about zebras",
            "note 2",
            "echo: note 2",
        ]
        older = (await ann.http.get(f"/api/conversations/c1/messages?limit=4&before={page['before']}")).json()
        assert [i["text"] for i in older["items"]] == ["note 0", "echo: note 0"] and older["before"] is None
        found = (await ann.http.get("/api/conversations?q=ZEBRA")).json()["conversations"]
        assert [c["id"] for c in found] == ["c1"]
        assert (await ann.http.get("/api/conversations?limit=0")).status_code == 400
        assert (await ann.http.get("/api/conversations/c1/messages?before=nan")).status_code == 400
        assert (await ann.http.get("/api/conversations?q=" + "x" * 201)).status_code == 400
        renamed = await ann.post("/api/conversations/c2/title", {"title": "Side topic"})
        assert renamed.status_code == 200
        titles = {
            c["id"]: c["title"] for c in (await ann.http.get("/api/conversations")).json()["conversations"]
        }
        assert titles == {"c1": "note 0", "c2": "Side topic"}
        await ws.close()
    finally:
        await ann.http.aclose()


async def test_the_signed_in_user_is_the_approval_identity(
    tmp_path: Path, db: Path, start_gateway: StartGateway
) -> None:
    users = await seed(db, ("ann", "user"), ("bob", "user"))
    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    config = accounts_config()
    config = replace(config, tools=replace(config.tools, enabled=True, workdir=str(workdir)))
    gateway = await start_gateway(config, store=SqliteStore(db))
    ann = await sign_in(gateway.port, {"token": users["ann"].token})
    bob = await sign_in(gateway.port, {"token": users["bob"].token})
    try:
        ann_ws = await socket(gateway.port, ann.cookie)
        await ann_ws.hello("c-ann", user_id="bob")
        await ann_ws.message("m1", "!sh rm -rf ./x")
        prompt = (await ann_ws.until(lambda f: f.get("type") == "prompt"))[-1]
        record = await gateway.store.get_approval(prompt["prompt_id"])
        assert record is not None and record.requester_id == users["ann"].account.user_id

        bob_ws = await socket(gateway.port, bob.cookie)
        await bob_ws.hello("c-bob")
        await bob_ws.send(
            {"type": "button", "id": "b1", "prompt_id": prompt["prompt_id"], "option_id": "once"}
        )
        refused = await bob_ws.until(lambda f: f.get("type") == "error")
        assert refused[-1]["code"] == "not_allowed"
        assert (await gateway.store.get_approval(prompt["prompt_id"])).state == "pending"

        await ann_ws.send(
            {"type": "button", "id": "a1", "prompt_id": prompt["prompt_id"], "option_id": "once"}
        )
        await ann_ws.until(lambda f: f.get("type") == "prompt_resolved")
        answered = await gateway.store.get_approval(prompt["prompt_id"])
        assert answered is not None and answered.state == "approved"
        assert answered.answered_by_id == users["ann"].account.user_id
        await ann_ws.close()
        await bob_ws.close()
    finally:
        await ann.http.aclose()
        await bob.http.aclose()


async def test_an_admin_revokes_a_token_and_the_socket_signed_in_with_it_closes(
    db: Path, start_gateway: StartGateway
) -> None:
    users = await seed(db, ("root", "admin"), ("ann", "user"))
    gateway = await start_gateway(accounts_config(session_check_seconds=3600), store=SqliteStore(db))
    root = await sign_in(gateway.port, {"token": users["root"].token})
    ann = await sign_in(gateway.port, {"token": users["ann"].token})
    try:
        assert (await ann.http.get("/api/admin/users")).status_code == 403
        assert (await ann.post("/api/admin/revoke", {"user": "root"})).status_code == 403
        listed = (await root.http.get("/api/admin/users")).json()["users"]
        assert {u["name"]: [t["token_id"] for t in u["tokens"]] for u in listed}["ann"] == [
            users["ann"].token_id
        ]
        ws = await socket(gateway.port, ann.cookie)
        await ws.hello("c-ann")
        revoked = await root.post("/api/admin/revoke", {"token_id": users["ann"].token_id})
        assert revoked.status_code == 200 and revoked.json()["revoked"] == f"token {users['ann'].token_id}"
        assert await _closed_code(ws) == 4401  # at once, not at the next hourly check
        assert (await ann.http.get("/api/me")).status_code == 401
        again = await ann.http.post(
            "/api/signin", json={"token": users["ann"].token}, headers={"Origin": origin(gateway.port)}
        )
        assert again.status_code == 401
        assert (await root.post("/api/admin/revoke", {"token_id": users["ann"].token_id})).status_code == 404
    finally:
        await root.http.aclose()
        await ann.http.aclose()


async def test_a_revocation_by_the_cli_closes_the_open_socket(
    tmp_path: Path, db: Path, start_gateway: StartGateway
) -> None:
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(session_check_seconds=0.2), store=SqliteStore(db))
    ann = await sign_in(gateway.port, {"token": users["ann"].token})
    await ann.http.aclose()
    ws = await socket(gateway.port, ann.cookie)
    await ws.hello("c-ann")
    config = tmp_path / "cli.yaml"
    config.write_text(f"store:\n  sqlite:\n    path: {db}\nplatforms:\n  web:\n    auth: accounts\n")
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "chatgate.app.cli", "user", "revoke", "ann", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Revoked user ann" in done.stdout
    assert await _closed_code(ws) == 4401


async def test_the_cookie_is_secure_when_configured_or_when_a_trusted_proxy_says_https(
    db: Path, start_gateway: StartGateway
) -> None:
    users = await seed(db, ("ann", "user"))
    proxied = web_config(
        http={"port": 0, "trusted_proxies": ["127.0.0.1"]}, platforms={"web": {"auth": "accounts"}}
    )
    plain = await start_gateway(proxied, store=SqliteStore(db))
    async with httpx.AsyncClient(base_url=origin(plain.port)) as http:
        headers = {"Origin": f"https://127.0.0.1:{plain.port}", "X-Forwarded-Proto": "https"}
        res = await http.post("/api/signin", json={"token": users["ann"].token}, headers=headers)
        assert res.status_code == 200 and "secure" in res.headers["set-cookie"].lower()
    await plain.stop()
    forced = await start_gateway(accounts_config(secure_cookies=True), store=SqliteStore(db))
    async with httpx.AsyncClient(base_url=origin(forced.port)) as http:
        res = await http.post(
            "/api/signin", json={"token": users["ann"].token}, headers={"Origin": origin(forced.port)}
        )
        assert res.status_code == 200 and "secure" in res.headers["set-cookie"].lower()


async def test_an_admin_adds_a_user_whose_token_is_answered_once_and_signs_in(
    db: Path, start_gateway: StartGateway
) -> None:
    users = await seed(db, ("root", "admin"), ("ann", "user"))
    gateway = await start_gateway(accounts_config(session_check_seconds=3600), store=SqliteStore(db))
    root = await sign_in(gateway.port, {"token": users["root"].token})
    ann = await sign_in(gateway.port, {"token": users["ann"].token})
    try:
        refused = await ann.post("/api/admin/users/add", {"name": "eve"})
        assert (refused.status_code, refused.json()["error"]) == (403, "not_admin")
        no_csrf = await root.post("/api/admin/users/add", {"name": "eve"}, **{"X-CSRF-Token": "wrong"})
        assert (no_csrf.status_code, no_csrf.json()["error"]) == (403, "csrf")
        bad = await root.post("/api/admin/users/add", {"name": "no spaces"})
        assert (bad.status_code, bad.json()["error"]) == (400, "invalid_request")
        added = await root.post("/api/admin/users/add", {"name": "Bea", "admin": True})
        assert added.status_code == 201 and added.headers["cache-control"] == "no-store"
        shown = added.json()
        assert (shown["name"], shown["role"]) == ("bea", "admin") and shown["token"].startswith("cgu-")
        taken = await root.post("/api/admin/users/add", {"name": "bea"})
        assert (taken.status_code, taken.json()["error"]) == (409, "name_taken")
        listed = (await root.http.get("/api/admin/users")).json()["users"]
        bea = next(u for u in listed if u["name"] == "bea")
        assert [t["token_id"] for t in bea["tokens"]] == [shown["token_id"]]
        assert shown["token"] not in json.dumps(listed)  # answered once, never listed
        signed = await sign_in(gateway.port, {"token": shown["token"]})
        assert signed.name == "bea"
        await signed.http.aclose()
    finally:
        await root.http.aclose()
        await ann.http.aclose()
