"""The agent's files reach Telegram: ``attach_file`` (driven by the echo agent's ``!attach``)
through the real adapter's multipart sendPhoto/sendDocument to the Bot API double, which
parses the upload as Telegram does. A SIGKILL of a real gateway mid-upload: after the restart
the file is posted once more, marked as a possible repeat (Telegram has no idempotency key)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from telegram_double import TOKEN, TOKEN_ENV, BotApiDouble, Gateways, User, private, telegram_config

from support.media_files import pdf, png
from support.postgres import DSN, pg_schema_fixture, sql  # noqa: F401  (the pg_schema fixture)
from support.procs import GatewayProcess

MARKER = "(possible repeat) "


def tools(workdir: Path, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "workdir": str(workdir), **extra}


async def test_an_attached_image_is_one_photo_with_its_bytes_and_a_pdf_one_document(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    user = User(601, "Ada")
    chat = private(user)
    workdir = tmp_path / "work"
    workdir.mkdir()
    image, report = png(64, 48, (0, 128, 255)), pdf("quarterly figures")
    (workdir / "chart.png").write_bytes(image)
    (workdir / "out").mkdir()
    (workdir / "out" / "report.pdf").write_bytes(report)
    config = telegram_config(double, tmp_path, telegram={"allow_users": [str(user.id)]}, tools=tools(workdir))
    await gateways.start(config)
    await double.push_message(chat, user, "!attach chart.png | the chart\n!attach out/report.pdf")
    await double.wait_for(lambda: len(double.files_sent(chat.id)) == 2, 60, "both files")
    photo, document = double.files_sent(chat.id)
    assert photo.file is not None and document.file is not None
    assert (photo.file.method, photo.file.name, photo.file.mime) == ("sendPhoto", "chart.png", "image/png")
    assert photo.file.data == image and photo.text == "the chart"
    assert (document.file.method, document.file.name) == ("sendDocument", "report.pdf")
    assert document.file.mime == "application/pdf" and document.file.data == report
    texts = [m.text for m in double.view(chat.id) if m.file is None]
    assert len(texts) == 1 and "attached chart.png" in texts[0], texts  # the reply, then its files
    assert double.view(chat.id)[-2:] == [photo, document]
    assert double.uploads_seen == 2


async def test_on_postgresql_the_attached_file_is_rows_and_arrives_whole(
    pg_schema: str, double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    """(``pg_schema`` first: it is dropped after the gateway stopped.)"""
    import hashlib

    user = User(604, "Di")
    chat = private(user)
    workdir = tmp_path / "work"
    workdir.mkdir()
    data = os.urandom(2_500_000)  # more than one ~1 MB chunk
    (workdir / "blob.bin").write_bytes(data)
    store = {"url": DSN, "postgres": {"schema": pg_schema}}
    config = telegram_config(
        double, tmp_path, telegram={"allow_users": [str(user.id)]}, tools=tools(workdir), store=store
    )
    await gateways.start(config)
    await double.push_message(chat, user, "!attach blob.bin")
    await double.wait_for(lambda: double.files_sent(chat.id), 60, "the file")
    (sent,) = double.files_sent(chat.id)
    assert sent.file is not None and sent.file.method == "sendDocument" and sent.file.data == data
    assert sent.file.mime == "application/octet-stream"
    sha = hashlib.sha256(data).hexdigest()
    rows = await sql(f'SELECT data FROM "{pg_schema}".media_chunks WHERE sha = $1 ORDER BY idx', sha)
    assert len(rows) >= 3 and b"".join(r["data"] for r in rows) == data


async def test_a_path_out_of_the_work_directory_is_refused_and_nothing_is_sent(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    user = User(602, "Bo")
    chat = private(user)
    workdir = tmp_path / "work"
    workdir.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("do not send\n")
    os.symlink(secret, workdir / "link.txt")
    (workdir / "big.bin").write_bytes(b"\x01" * 5000)
    config = telegram_config(
        double,
        tmp_path,
        telegram={"allow_users": [str(user.id)]},
        tools=tools(workdir, attach_max_bytes=4000),
    )
    await gateways.start(config)
    await double.push_message(chat, user, "!attach link.txt\n!attach ../secret.txt\n!attach big.bin")
    # Reading ../secret.txt is asked as `cat -- ../secret.txt` would be; approved, it is still refused.
    await double.wait_for(lambda: any(m.keyboard for m in double.view(chat.id)), 30, "the approval prompt")
    (prompt,) = [m for m in double.view(chat.id) if m.keyboard]
    assert "wants to send you a file" in prompt.text and "cat -- ../secret.txt" in prompt.text
    assert prompt.keyboard is not None
    await double.push_callback(chat, user, prompt.message_id, prompt.keyboard[0][0]["callback_data"])
    await double.wait_for(lambda: any("4.0 kB" in m.text for m in double.view(chat.id)), 30, "the reply")
    (reply,) = [m.text for m in double.view(chat.id) if "4.0 kB" in m.text]
    assert reply.count("outside the work directory") == 2, reply
    assert "the limit is 4.0 kB" in reply, reply
    assert double.uploads_seen == 0


@pytest.mark.slow
async def test_sigkill_mid_upload_posts_the_file_again_marked(
    double: BotApiDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    user = User(603, "Cy")
    chat = private(user)
    workdir = tmp_path / "work"
    workdir.mkdir()
    image = png(40, 40, (250, 10, 10))
    (workdir / "dot.png").write_bytes(image)
    config = {
        "agent": {"echo": {"chunk_delay_ms": 2}},
        "platforms": {
            "web": {"enabled": False},
            "telegram": {
                "enabled": True,
                "token_env": TOKEN_ENV,
                "allow_users": [str(user.id)],
                "api_base": double.base,
                "poll_timeout_seconds": 5,
            },
        },
        "tools": tools(workdir),
        "locks": {"credential_dir": str(tmp_path / "locks")},
        "delivery": {"duplicate_marker": MARKER},
    }
    gateway = GatewayProcess(tmp_path, config)
    double.hang_uploads = 1  # Telegram posts it; the answer never comes
    await gateway.start()
    try:
        await double.push_message(chat, user, "!attach dot.png | a red dot")
        await double.wait_for(lambda: double.uploads_seen == 1, 60, "the upload")
        await gateway.kill()
        await gateway.start()
        await double.wait_for(lambda: len(double.files_sent(chat.id)) == 2, 60, "the upload again")
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    first, again = double.files_sent(chat.id)
    assert first.file is not None and again.file is not None
    assert first.file.data == again.file.data == image
    assert first.text == "a red dot" and again.text == MARKER + "a red dot"
    assert double.uploads_seen == 2, "posted once more, not again and again"
    assert TOKEN not in gateway.logs()
