"""A web chat upload's ref is good on every process of a fleet on one PostgreSQL.

The page uploads its file to process A (a load balancer sent the POST there) and sends the
message naming the ref on process B: B checks the ref with the fleet's shared key (made once in
``gateway_keys``) and reads the blob from ``media_chunks``, so the agent receives the file. Before,
each process signed with a key of its own and B refused the ref as "not an upload of this
conversation". A ref signed for another conversation is still refused on B, and a file the agent sent on B
downloads from A (its link signed with the same key, streamed from the chunk rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from chatgate.domain.media import human_size
from support.postgres import DSN, pg_schema_fixture, sql  # noqa: F401  (the pg_schema fixture)
from support.procs import FrameClient, start_fleet, stop_fleet

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _config(schema: str, workdir: Path) -> dict[str, Any]:
    return {
        "store": {"url": DSN, "postgres": {"schema": schema, "pool_size": 3}},
        "tools": {"enabled": True, "workdir": str(workdir)},
        "shutdown": {"drain_seconds": 1},
    }


async def _upload(port: int, chat: str, user: str, name: str, data: bytes) -> dict[str, Any]:
    headers = {
        "X-Chatgate-User": user,
        "Origin": f"http://127.0.0.1:{port}",
        "Content-Type": "application/octet-stream",
    }
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        answer = await http.post(
            f"/api/conversations/{chat}/uploads?name={name}", headers=headers, content=data
        )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_an_upload_to_one_process_is_attached_on_another(tmp_path: Path, pg_schema: str) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    report = bytes(range(256)) * 10_000  # 2.56 MB: three chunk rows, streamed piece by piece
    (workdir / "report.bin").write_bytes(report)
    fleet = await start_fleet(tmp_path, _config(pg_schema, workdir), 2)
    try:
        ann_a = FrameClient(fleet[0].port, "c-ann", "user-ann")
        await ann_a.connect()  # the conversation is ann's (claimed on A)
        bob_a = FrameClient(fleet[0].port, "c-bob", "user-bob")
        await bob_a.connect()
        data = b"minutes of the meeting\n" * 100
        upload = await _upload(fleet[0].port, "c-ann", "user-ann", "minutes.txt", data)
        bobs = await _upload(fleet[0].port, "c-bob", "user-bob", "bob.txt", b"bob's notes\n")
        await ann_a.close()
        await bob_a.close()

        ann_b = FrameClient(fleet[1].port, "c-ann", "user-ann")
        await ann_b.connect()
        files = [{"ref": upload["ref"], "name": upload["name"]}]
        await ann_b.send({"type": "message", "id": "m1", "text": "", "attachments": files})
        final = await ann_b.final("m1")
        assert final["text"] == f"echo: received minutes.txt (text/plain, {human_size(len(data))})"

        stolen = [{"ref": bobs["ref"], "name": "bob.txt"}]  # bob's ref, signed for c-bob
        await ann_b.send({"type": "message", "id": "m2", "text": "", "attachments": stolen})
        refused = await ann_b.wait_for(
            lambda f: f["type"] == "error" and f.get("id") == "m2", what="m2's error"
        )
        assert "not an upload of this conversation" in refused["message"]

        # A file the agent sent on B: its link is signed with the same key, so A serves it too,
        # streamed from PostgreSQL's chunk rows.
        await ann_b.message("m3", "!attach report.bin")
        sent = await ann_b.wait_for(lambda f: f.get("file", {}).get("name") == "report.bin", what="the file")
        await ann_b.close()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{fleet[0].port}") as http:
            got = await http.get(sent["file"]["url"], headers={"X-Chatgate-User": "user-ann"})
        assert got.status_code == 200 and got.content == report
        assert got.headers["content-length"] == str(len(report))
        (key,) = await sql(f'SELECT count(*) AS n FROM "{pg_schema}".gateway_keys')
        assert key["n"] == 1  # one key, made once, for the whole fleet
    finally:
        await stop_fleet(fleet)
