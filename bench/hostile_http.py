"""Issue 27's HTTP figures (findings 5, 6, 8-12), measured against real ``chatgate run`` subprocesses.

Each section starts its own gateway (so that its log is its own), plays what a stranger can
send over loopback, and reports what the gateway did; one JSON object on stdout. The script
uses no config key the gateway before the fix lacks, so the same command measures both:

    python bench/hostile_http.py [--quick] [--only SECTION ...]
    PYTHONPATH=/path/to/older/src python bench/hostile_http.py   # the same, against that code

- ``idle_sockets`` (5): WebSockets that never say hello, from 40 source addresses; what a health
  probe, an API call and a web chat user get meanwhile; how many the gateway still holds later.
- ``trickled_bodies`` (6): bodies sent a byte a second to ``/hooks/<route>``; probes meanwhile;
  how long each is held; the log bytes per hang-up when the senders give up.
- ``sign_in`` (8): password guesses at one account with a rotating ``X-Forwarded-For`` and
  rotating 127.0.x.y source addresses: how many reach the password check.
- ``webhooks`` (9): a captured signed delivery replayed under 20 new delivery ids; a signed
  body nested 100,000 deep.
- ``slack`` (10): ``/slack/events`` with a non-numeric timestamp, and six hostile signed bodies.
- ``wrong_keys`` (11): 2,000 API requests with a wrong key: log bytes, per minute at that rate.
- ``idempotency`` (12): one Idempotency-Key reused on another conversation and another endpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import websockets
import yaml

WEB_TOKEN = "bench-web-token"
API_KEY = "bench-api-key-0123456789"
HOOK_SECRET = "bench-hook-secret"
SLACK_SECRET = "bench-slack-signing-secret"
PASSWORD = "correct horse battery staple"
ENV = {
    "BENCH_WEB_TOKEN": WEB_TOKEN,
    "BENCH_API_KEY": API_KEY,
    "BENCH_HOOK_SECRET": HOOK_SECRET,
    "BENCH_SLACK_BOT": "xoxb-bench",
    "BENCH_SLACK_SECRET": SLACK_SECRET,
}
HOOKS = {
    "enabled": True,
    "routes": {"ci": {"secret_env": "BENCH_HOOK_SECRET", "target": {"platform": "web", "chat_id": "hooks"}}},
}
API = {"enabled": True, "key_storage": "env", "key_env": "BENCH_API_KEY"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def source(n: int) -> str:
    """The n-th stranger's address: 127.0.1.1, 127.0.1.2... (never the probes' 127.0.0.1)."""
    return f"127.0.{1 + n // 250}.{1 + n % 250}"


class Gateway:
    """``chatgate run`` in a subprocess with ``config``; its log is ``log``."""

    def __init__(self, root: Path, config: dict[str, Any]) -> None:
        self.root = root
        self.port = _port()
        self.log = root / "gateway.log"
        root.mkdir(parents=True, exist_ok=True)
        (root / "chatgate.yaml").write_text(
            yaml.safe_dump({"agent": {"echo": {"chunk_delay_ms": 0}}, **config})
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str) -> str:
        """``chatgate ARGS`` on this gateway's config and state directory; its stdout."""
        command = [sys.executable, "-m", "chatgate.app.cli", *args]
        command += ["--config", str(self.root / "chatgate.yaml"), "--state-dir", str(self.root / "state")]
        return subprocess.run(command, text=True, check=True, capture_output=True, env=self._env()).stdout

    def _env(self) -> dict[str, str]:
        return {**{k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}, **ENV}

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "chatgate.app.cli",
            "run",
            "--config",
            str(self.root / "chatgate.yaml"),
        ]
        command += ["--state-dir", str(self.root / "state"), "--port", str(self.port)]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=out, env=self._env())
        deadline = time.monotonic() + 90
        while " is running: " not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the gateway did not start: {self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)

    def log_bytes(self) -> int:
        return self.log.stat().st_size

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(60)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


async def _timed(call: Awaitable[httpx.Response]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        response = await call
    except httpx.HTTPError as exc:
        return {"status": type(exc).__name__, "ms": round((time.perf_counter() - started) * 1000, 1)}
    return {"status": response.status_code, "ms": round((time.perf_counter() - started) * 1000, 1)}


async def probes(gateway: Gateway) -> dict[str, Any]:
    """A health probe, a readiness probe, an API call with the valid key, a web chat user's message."""
    async with httpx.AsyncClient(base_url=gateway.base, timeout=30) as http:
        result = {
            "healthz": await _timed(http.get("/healthz")),
            "readyz": await _timed(http.get("/readyz")),
            "api": await _timed(
                http.post(
                    "/v1/chat/completions",
                    json={"model": "chatgate", "messages": [{"role": "user", "content": "hi"}]},
                    headers={"Authorization": f"Bearer {API_KEY}"},
                )
            ),
        }
    started = time.perf_counter()
    try:
        async with websockets.connect(f"ws://127.0.0.1:{gateway.port}/ws", open_timeout=30) as ws:
            await ws.send(
                json.dumps({"type": "hello", "chat_id": "probe", "user_id": "u", "token": WEB_TOKEN})
            )
            await ws.send(json.dumps({"type": "message", "id": "m1", "text": "hi"}))
            while json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "final":
                pass
        result["web"] = {"status": "answered", "ms": round((time.perf_counter() - started) * 1000, 1)}
    except Exception as exc:
        result["web"] = {"status": type(exc).__name__}
    return result


async def _idle_socket(port: int, address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
    writer.write(
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    with contextlib.suppress(Exception):
        status = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        return reader, writer, status.startswith(b"HTTP/1.1 101")
    return reader, writer, False


def _open(sockets: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]]) -> int:
    return sum(1 for reader, _, upgraded in sockets if upgraded and not reader.at_eof())


async def _read_closed(reader: asyncio.StreamReader) -> None:
    """Read what the server sent (close frames) until its end or a quiet moment: ``at_eof`` then tells."""
    with contextlib.suppress(Exception):
        while await asyncio.wait_for(reader.read(4096), 0.05):
            pass


async def idle_sockets(root: Path, quick: bool) -> dict[str, Any]:
    count, checks = (200, (2.0, 15.0)) if quick else (1000, (5.0, 15.0, 65.0))
    gateway = Gateway(root, {"platforms": {"web": {"access_token_env": "BENCH_WEB_TOKEN"}, "api": API}})
    gateway.start()
    try:
        opened = time.monotonic()
        sockets = []
        for start in range(0, count, 50):
            batch = range(start, min(start + 50, count))
            sockets += await asyncio.gather(*(_idle_socket(gateway.port, source(n % 40)) for n in batch))
        result: dict[str, Any] = {"sockets": count, "upgraded": sum(u for _, _, u in sockets)}
        result["probes"] = await probes(gateway)
        held = {}
        for at in checks:
            await asyncio.sleep(max(0.0, opened + at - time.monotonic()))
            await asyncio.gather(*(_read_closed(reader) for reader, _, _ in sockets))
            held[f"{at:g}s"] = _open(sockets)
        result["still_open_after"] = held
        for _, writer, _ in sockets:
            writer.close()
        return result
    finally:
        gateway.stop()


async def trickled_bodies(root: Path, quick: bool) -> dict[str, Any]:
    count, give_up = (20, 12.0) if quick else (60, 60.0)
    gateway = Gateway(
        root, {"hooks": HOOKS, "platforms": {"web": {"access_token_env": "BENCH_WEB_TOKEN"}, "api": API}}
    )
    gateway.start()
    try:
        before = gateway.log_bytes()
        started = time.monotonic()
        closed_at: dict[int, float] = {}

        async def drip(n: int) -> None:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", gateway.port, local_addr=(source(n % 6), 0)
            )
            writer.write(b"POST /hooks/ci HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
            writer.write(b"Content-Length: 200\r\n\r\n")
            try:
                while time.monotonic() - started < give_up:
                    writer.write(b"x")
                    await writer.drain()
                    with contextlib.suppress(TimeoutError):
                        if await asyncio.wait_for(reader.read(4096), 1.0) == b"" or reader.at_eof():
                            break
                else:
                    return  # still held when the sender gives up: it hangs up
                closed_at[n] = time.monotonic() - started
            except (ConnectionError, OSError):
                closed_at[n] = time.monotonic() - started
            finally:
                writer.close()

        senders = [asyncio.create_task(drip(n)) for n in range(count)]
        await asyncio.sleep(2.0)
        result: dict[str, Any] = {"bodies": count, "probes_at_2s": await probes(gateway)}
        await asyncio.gather(*senders)
        await asyncio.sleep(1.0)  # the hang-ups' log lines
        held = sorted(closed_at.values())
        result["closed_by_gateway"] = len(held)
        result["held_s"] = (
            {"median": round(held[len(held) // 2], 1), "max": round(held[-1], 1)} if held else None
        )
        result["still_held_when_senders_hung_up"] = count - len(held)
        hang_ups = count - len(held)
        grown = gateway.log_bytes() - before
        result["log_bytes"] = grown
        result["log_bytes_per_hang_up"] = round(grown / hang_ups) if hang_ups else None
        return result
    finally:
        gateway.stop()


async def sign_in(root: Path, quick: bool) -> dict[str, Any]:
    """Guesses at ann's sign-in token (its id is known: it is in every token she was given; the
    secret part is guessed), 20 at a time, from a rotating X-Forwarded-For or source address."""
    seconds = 3.0 if quick else 10.0
    gateway = Gateway(root, {"platforms": {"web": {"auth": "accounts"}}})
    token_id = re.search(r"cgu-([0-9a-f]{12})-", gateway.cli("user", "add", "ann"))
    assert token_id is not None, "chatgate user add printed no sign-in token"
    gateway.start()
    try:
        counts: dict[str, dict[str, Any]] = {}
        for mode in ("rotating_x_forwarded_for", "rotating_source_address"):
            codes: dict[str, int] = {}
            end = time.monotonic() + seconds
            shared = httpx.AsyncClient(
                base_url=gateway.base, timeout=30, limits=httpx.Limits(max_connections=20)
            )
            n = 0

            async def guess(k: int, mode: str = mode, shared: httpx.AsyncClient = shared) -> int:
                headers = {"Origin": gateway.base}
                body = {"token": f"cgu-{token_id.group(1)}-{secrets.token_urlsafe(32)}"}
                if mode == "rotating_x_forwarded_for":
                    headers["X-Forwarded-For"] = f"10.{k // 65536 % 256}.{k // 256 % 256}.{k % 256}"
                    return (await shared.post("/api/signin", json=body, headers=headers)).status_code
                transport = httpx.AsyncHTTPTransport(local_address=source(k % 60000))
                async with httpx.AsyncClient(base_url=gateway.base, transport=transport, timeout=30) as http:
                    return (await http.post("/api/signin", json=body, headers=headers)).status_code

            while time.monotonic() < end:
                for code in await asyncio.gather(*(guess(n + k) for k in range(20))):
                    codes[str(code)] = codes.get(str(code), 0) + 1
                n += 20
            await shared.aclose()
            counts[mode] = {
                "statuses": codes,
                "guesses_checked_per_s": round(codes.get("401", 0) / seconds, 1),
            }
        log = gateway.log.read_text(errors="replace")
        return {"seconds_each": seconds, **counts, "log_names_a_forged_address": "client=10." in log}
    finally:
        gateway.stop()


def _hook_headers(body: bytes, delivery: str, age: float = 0.0) -> dict[str, str]:
    """Signed both ways: the body alone (before the fix) and ``<timestamp>.<id>.<body>`` (after)."""
    stamp = str(int(time.time() - age))
    return {
        "Content-Type": "application/json",
        "X-Delivery-Id": delivery,
        "X-Chatgate-Timestamp": stamp,
        "X-Chatgate-Signature": "sha256="
        + hmac.new(HOOK_SECRET.encode(), f"{stamp}.{delivery}.".encode() + body, hashlib.sha256).hexdigest(),
        "X-Hub-Signature-256": "sha256=" + hmac.new(HOOK_SECRET.encode(), body, hashlib.sha256).hexdigest(),
    }


async def webhooks(root: Path, quick: bool) -> dict[str, Any]:
    gateway = Gateway(root, {"hooks": HOOKS})
    gateway.start()
    try:
        body = b'{"status": "green"}'
        captured = _hook_headers(body, "original")
        async with httpx.AsyncClient(base_url=gateway.base, timeout=30) as http:
            first = await http.post("/hooks/ci", content=body, headers=captured)
            replays = [
                (
                    await http.post(
                        "/hooks/ci", content=body, headers={**captured, "X-Delivery-Id": f"replay-{n}"}
                    )
                ).status_code
                for n in range(20)
            ]
            stale = await http.post("/hooks/ci", content=body, headers=_hook_headers(body, "stale", age=600))
            deep = b"[" * 100_000 + b"]" * 100_000
            before = gateway.log_bytes()
            nested = await http.post("/hooks/ci", content=deep, headers=_hook_headers(deep, "deep"))
        return {
            "first": first.status_code,
            "replays_under_new_ids_admitted": sum(code == 200 for code in replays),
            "replay_statuses": sorted(set(replays)),
            "signed_10_minutes_ago": stale.status_code,
            "nested_100000_deep": nested.status_code,
            "nested_log_bytes": gateway.log_bytes() - before,
        }
    finally:
        gateway.stop()


def _slack(raw: bytes, content_type: str, stamp: str | None = None) -> dict[str, str]:
    stamp = str(int(time.time())) if stamp is None else stamp
    signature = (
        "v0=" + hmac.new(SLACK_SECRET.encode(), f"v0:{stamp}:".encode() + raw, hashlib.sha256).hexdigest()
    )
    return {"Content-Type": content_type, "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}


async def slack(root: Path, quick: bool) -> dict[str, Any]:
    requests = 50 if quick else 200
    dead = _port()  # auth.test goes nowhere: the checks measured here come before it matters
    config = {
        "platforms": {
            "web": {"enabled": False},
            "slack": {"enabled": True, "mode": "http", "bot_token_env": "BENCH_SLACK_BOT",
                      "signing_secret_env": "BENCH_SLACK_SECRET", "allow_all": True,
                      "api_base": f"http://127.0.0.1:{dead}/api/"},
        }
    }  # fmt: skip
    gateway = Gateway(root, config)
    gateway.start()
    try:
        url = "/slack/events"
        async with httpx.AsyncClient(base_url=gateway.base, timeout=30) as http:
            before = gateway.log_bytes()
            started = time.monotonic()
            statuses = [
                (
                    await http.post(url, content=b"{}", headers=_slack(b"{}", "application/json", "soon"))
                ).status_code
                for _ in range(requests)
            ]
            elapsed = time.monotonic() - started
            grown = gateway.log_bytes() - before
            bodies: dict[str, tuple[bytes, str]] = {
                "not_json": (b"{not json", "application/json"),
                "nested_deep": (b"[" * 100_000 + b"]" * 100_000, "application/json"),
                "huge_int": (b'{"n": ' + b"9" * 5000 + b"}", "application/json"),
                "bad_utf8": (b'{"t": "\xff\xfe"}', "application/json"),
                "form_payload_not_json": (b"payload=%7Bnot+json", "application/x-www-form-urlencoded"),
                "form_payload_deep": (
                    b"payload=" + b"%5B" * 50_000 + b"%5D" * 50_000,
                    "application/x-www-form-urlencoded",
                ),
            }
            hostile: dict[str, Any] = {
                name: (await _timed(http.post(url, content=raw, headers=_slack(raw, kind))))["status"]
                for name, (raw, kind) in bodies.items()
            }
            hostile["log_bytes"] = gateway.log_bytes() - before - grown
        return {
            "non_numeric_timestamp": {
                "requests": requests,
                "requests_per_s": round(requests / elapsed, 1),
                "statuses": sorted(set(statuses)),
                "log_bytes": grown,
                "log_bytes_per_request": round(grown / requests),
            },
            "hostile_signed_bodies": hostile,
        }
    finally:
        gateway.stop()


async def wrong_keys(root: Path, quick: bool) -> dict[str, Any]:
    """2,000 requests with a wrong key as fast as 20 at a time go, then (unless ``quick``) more at
    that pace until a minute has passed: the log of the first 2,000, and of the whole minute
    (budgeted lines are not linear in the requests: the minute is measured, not projected)."""
    count, minute = (300, 0.0) if quick else (2000, 61.0)
    gateway = Gateway(root, {"platforms": {"api": API}})
    gateway.start()
    try:
        before = gateway.log_bytes()
        started = time.monotonic()
        statuses: dict[int, int] = {}
        sent = 0
        first: dict[str, Any] = {}
        async with httpx.AsyncClient(base_url=gateway.base, timeout=30) as http:
            while sent < count or time.monotonic() - started < minute:
                answers = await asyncio.gather(
                    *(
                        http.get("/v1/models", headers={"Authorization": f"Bearer wrong-{sent + k}"})
                        for k in range(20)
                    )
                )
                sent += 20
                for a in answers:
                    statuses[a.status_code] = statuses.get(a.status_code, 0) + 1
                if sent == count:
                    elapsed = time.monotonic() - started
                    first = {"seconds": round(elapsed, 1), "log_bytes": gateway.log_bytes() - before}
        result: dict[str, Any] = {"requests": count, "statuses": statuses, f"first_{count}": first}
        if minute:
            await asyncio.sleep(1.0)  # the minute's summary line
            result["minute"] = {
                "requests": sent,
                "seconds": round(time.monotonic() - started, 1),
                "log_bytes": gateway.log_bytes() - before,
            }
        return result
    finally:
        gateway.stop()


async def idempotency(root: Path, quick: bool) -> dict[str, Any]:
    gateway = Gateway(root, {"platforms": {"api": API}})
    gateway.start()
    try:
        key = {"Authorization": f"Bearer {API_KEY}", "Idempotency-Key": "k1"}
        ask = {"model": "chatgate", "messages": [{"role": "user", "content": "same text"}]}
        async with httpx.AsyncClient(base_url=gateway.base, timeout=60) as http:
            first = await http.post(
                "/v1/chat/completions", json=ask, headers={**key, "X-Chatgate-Conversation": "a"}
            )
            other_conversation = await http.post(
                "/v1/chat/completions", json=ask, headers={**key, "X-Chatgate-Conversation": "b"}
            )
            other_endpoint = await http.post(
                "/v1/responses",
                json={"model": "chatgate", "input": "same text"},
                headers={**key, "X-Chatgate-Conversation": "a"},
            )
        first_answer = first.json()["choices"][0]["message"]["content"]

        def told(response: httpx.Response) -> dict[str, Any]:
            return {
                "status": response.status_code,
                "returned_the_first_answer": first_answer in response.text,
            }

        return {"another_conversation": told(other_conversation), "another_endpoint": told(other_endpoint)}
    finally:
        gateway.stop()


SECTIONS: dict[str, Callable[[Path, bool], Coroutine[Any, Any, dict[str, Any]]]] = {
    "idle_sockets": idle_sockets,
    "trickled_bodies": trickled_bodies,
    "sign_in": sign_in,
    "webhooks": webhooks,
    "slack": slack,
    "wrong_keys": wrong_keys,
    "idempotency": idempotency,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller and shorter (for the smoke test)")
    parser.add_argument("--only", nargs="*", choices=sorted(SECTIONS), help="run only these sections")
    args = parser.parse_args()
    import chatgate

    result: dict[str, Any] = {"chatgate": str(Path(chatgate.__file__).parent), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-hostile-") as tmp:
        for name in args.only or SECTIONS:
            try:
                result[name] = asyncio.run(SECTIONS[name](Path(tmp) / name, args.quick))
            except Exception as exc:  # a section the code under test broke: say so, measure the rest
                result[name] = {"failed": f"{type(exc).__name__}: {str(exc)[:300]}"}
    result["load_after"] = os.getloadavg()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
