"""``chatgate store migrate --to postgresql://…`` copies a real SQLite state into an empty schema:
every role's state, in order, with what a dead process held handed back; and it refuses a
database a gateway has open, or a schema that already holds data."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from chatgate.domain.accounts import Account, SignInToken, WebSession, hash_secret
from chatgate.domain.api_keys import ApiKeyRecord, hash_token
from chatgate.domain.background import TaskRecord
from chatgate.domain.media import MediaItem, MediaRecord
from chatgate.domain.outbox import OutboxSettlement
from chatgate.domain.pairing import PairingLimits
from chatgate.domain.schedules import Schedule, ScheduleTarget
from chatgate.domain.source import Source
from chatgate.store.postgres import PostgresStore
from chatgate.store.sqlite import SqliteStore
from contract.kit import T0, approval, draft, put_outbox, req
from support.postgres import DSN, pg_schema_fixture  # noqa: F401  (the pg_schema fixture)
from support.store_values import outcome, src

SCHEDULE = Schedule(
    "s1", "every", "60", "stand up", ScheduleTarget(Source("webchat", "c1"), "k1"), "chat", T0 + 60, T0,
    deliver_only=True, paused=True, name="standup", meta={"by": "u1"},
)  # fmt: skip
ANN = Account("a00000000001", "ann", "admin", T0)
BLOB = b"a file kept as a blob\n" * 1000
BLOB_SHA = hashlib.sha256(BLOB).hexdigest()
MEDIA_ITEM = MediaItem(BLOB_SHA, "text/plain", len(BLOB), "a.txt")
TASK = TaskRecord("t1", "delegate", "k1", "sid-1", "k1/task:t1", src(), "do it", T0, "done", "42", T0 + 1)


def migrate(state_dir: Path, schema: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "chatgate.app.cli",
        "store",
        "migrate",
        "--to",
        DSN,
        "--schema",
        schema,
    ]
    return subprocess.run(
        [*command, "--state-dir", str(state_dir)], capture_output=True, text=True, timeout=120
    )


async def fill(path: Path) -> None:
    store = SqliteStore(path)
    await store.open()
    for i in range(5):
        await store.admit(req(f"d{i}", "k1", f"m{i}"))
    await store.admit(req("e1", "k2", "other", chat_id="c2"))
    (claim,) = await store.claim_sessions("old", 1, 30.0, 1)
    nxt = await store.complete_turn("old", outcome(claim, draft("final:1"), reply="re m0"), 30.0, 1)
    assert nxt is not None  # m1 is claimed by "old", which now "dies" with it
    await put_outbox(store, draft("n:1", "c2", key="k2"))
    rows = await store.claim_outbox(10)
    await store.settle_outbox([OutboxSettlement(r.id, "sent") for r in rows if r.idem_key == "final:1"])
    await store.set_cursor("telegram:offset", "42")
    await store.create_approval(approval("p-1"))
    await store.request_pairing("telegram", "u9", "Zed", "c9", T0, PairingLimits(), lambda r: draft("pair:1"))
    await store.create_api_key(ApiKeyRecord("a1", "ci", T0, revoked_at=T0 + 5), hash_token("cg-a1-x"))
    await store.save_schedule(SCHEDULE)
    await store.create_account(ANN, "scrypt$x")
    await store.add_sign_in_token(SignInToken("t00000000001", ANN.user_id, T0), hash_secret("cgu-token"))
    await store.create_web_session(
        WebSession("s1", ANN.user_id, T0, T0 + 99, "t00000000001"), hash_secret("c")
    )
    await store.claim_chat("web", "c1", ANN.user_id, T0)
    await store.set_chat_title("web", "c1", "first words", replace=False)
    upload = path.parent / "upload.part"
    upload.write_bytes(BLOB)
    await store.put_blob(BLOB_SHA, str(upload))
    await store.record_media(MediaRecord("1:0", MEDIA_ITEM, None, "a.txt"), T0)
    await store.record_media(
        MediaRecord("1:1", MediaItem("f" * 64, "image/png", 3, "gone.png"), None, "gone.png"), T0
    )
    await store.close()
    _put_task(path)


def _put_task(path: Path) -> None:
    """A finished task row as a gateway leaves it (``start_task`` would also queue its child's input)."""

    def put(conn: sqlite3.Connection) -> None:
        t = TASK
        conn.execute(
            "INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (t.id, t.kind, t.parent_key, t.parent_session_id, t.child_key, json.dumps(t.origin.to_dict()),
             t.prompt, t.created_at, t.status, t.result, t.finished_at, t.note),
        )  # fmt: skip
        conn.commit()

    conn = sqlite3.connect(path)
    try:
        put(conn)
    finally:
        conn.close()


async def test_a_sqlite_state_moves_into_postgres_and_carries_on_there(tmp_path, pg_schema):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    await fill(state_dir / "chatgate.db")
    done = await asyncio.to_thread(migrate, state_dir, pg_schema)
    assert done.returncode == 0, done.stderr
    assert "2 sessions, 7 messages" in done.stdout and f"schema {pg_schema}" in done.stdout
    assert "outbox:" in done.stderr  # the progress, a line per table off a terminal

    store = PostgresStore(DSN, schema=pg_schema)
    await store.open()
    try:
        assert await store.queue_depth() == 5  # m1..m4 and "other"
        assert await store.recover("new") == 0, "the old owner's lease was not carried over"
        claims = {c.session_key: c for c in await store.claim_sessions("new", 10, 30.0, 5)}
        assert [i.inbound.text for i in claims["k1"].items] == ["m1", "m2", "m3", "m4"]
        assert claims["k1"].items[0].attempts == 2, "m1's turn died with the old process"
        assert [e.content for e in await store.history(claims["k1"].session_id, 10)] == ["m0", "re m0"]
        pending = await store.claim_outbox(10)
        assert {r.idem_key: r.possibly_duplicate for r in pending} == {"n:1": True, "pair:1": False}
        assert await store.outbox_status("final:1") == "sent"
        assert await store.get_cursor("telegram:offset") == "42"
        assert (await store.get_approval("p-1")) is not None
        assert [p.user_id for p in await store.pending_pairings(T0)] == ["u9"]
        assert await store.api_key_by_hash(hash_token("cg-a1-x")) == ApiKeyRecord("a1", "ci", T0, T0 + 5)
        assert await store.list_schedules() == [SCHEDULE]
        assert await store.get_task("t1") == TASK
        assert await store.account_by_name("ann") == (ANN, "scrypt$x")
        token = await store.sign_in_token_by_hash(hash_secret("cgu-token"))
        assert token is not None and token[0].token_id == "t00000000001"
        session = await store.signed_in(hash_secret("c"), T0 + 1)
        assert session is not None and session.session.via == "t00000000001"
        assert [(c.chat_id, c.title) for c in await store.list_chats("web", ANN.user_id, None, 5)] == [
            ("c1", "first words")
        ]
        assert await store.media_record("1:0") == MediaRecord("1:0", MEDIA_ITEM, None, "a.txt")
        assert await store.read_blob(BLOB_SHA) == BLOB  # the file became rows
        assert await store.read_blob("f" * 64) is None  # a record whose file was gone stays without
        later = await store.admit(req("after", "k3", "new one", chat_id="c3"))
        assert later.new and later.seq > max(i.seq for c in claims.values() for i in c.items)
    finally:
        await store.close()

    again = await asyncio.to_thread(migrate, state_dir, pg_schema)
    assert again.returncode == 1 and "already holds chatgate data" in again.stderr


async def test_a_database_a_gateway_has_open_is_not_migrated(tmp_path, pg_schema):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    running = SqliteStore(state_dir / "chatgate.db")
    await running.open()
    try:
        done = await asyncio.to_thread(migrate, state_dir, pg_schema)
    finally:
        await running.close()
    assert done.returncode == 1 and "open in a running gateway" in done.stderr
