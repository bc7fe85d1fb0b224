"""A real Synapse homeserver for the Matrix tests: one per test worker, on 127.0.0.1.

``start_synapse`` writes a throwaway config in a temp directory (no federation listener and
no federation, SQLite, registration only by shared secret, no presence, generous rate limits
that ``override_ratelimit`` narrows per user), generates its signing key, starts
``python -m synapse.app.homeserver`` and waits until ``/_matrix/client/versions`` answers.
Users are created through the admin API (``/_synapse/admin/v1/register`` with the shared
secret's HMAC); every test makes its own, so tests share the server but no account or room.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SECRET = "chatgate-test-shared-secret"
READY_TIMEOUT = 90.0
_names = itertools.count(1)

LOG_CONFIG = """\
version: 1
formatters: {precise: {format: '%(asctime)s %(name)s %(levelname)s %(message)s'}}
handlers: {file: {class: logging.FileHandler, formatter: precise, filename: LOGFILE}}
root: {level: WARNING, handlers: [file]}
disable_existing_loggers: false
"""


def _limit(per_second: int, burst: int) -> dict[str, float]:
    return {"per_second": per_second, "burst_count": burst}


def config(data: Path, port: int) -> dict[str, Any]:
    lots = _limit(1000, 1000)
    return {
        "server_name": "localhost",
        "pid_file": str(data / "homeserver.pid"),
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(data / "homeserver.db")}},
        "log_config": str(data / "log.yaml"),
        "media_store_path": str(data / "media"),
        "signing_key_path": str(data / "signing.key"),
        "registration_shared_secret": SECRET,
        "macaroon_secret_key": uuid.uuid4().hex,
        "form_secret": uuid.uuid4().hex,
        "report_stats": False,
        "enable_registration": False,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "use_presence": False,
        "url_preview_enabled": False,
        # Lower than Synapse's default (50M), so a test sees the adapter take the homeserver's own
        # limit and a file over it is cheap to make (test_matrix_files_out.py).
        "max_upload_size": "4M",
        "enable_metrics": False,
        # Every user gets its own limit through the admin API's override_ratelimit; the default
        # (what a user without one gets) is Synapse's own: 0.2 messages per second, burst 10.
        "rc_message": _limit(0.2, 10),
        "rc_login": {"address": lots, "account": lots, "failed_attempts": lots},
        "rc_registration": lots,
        "rc_joins": {"local": lots, "remote": lots},
        "rc_joins_per_room": lots,
        "rc_invites": {"per_room": lots, "per_user": lots, "per_issuer": lots},
        "rc_room_creation": lots,
        "rc_admin_redaction": lots,
    }


@dataclass(slots=True)
class Account:
    user_id: str
    token: str
    password: str


@dataclass
class Synapse:
    """A running homeserver: its address, an admin, and ``register`` for more users."""

    base: str
    data: Path
    proc: subprocess.Popen[bytes]
    started_in: float
    """Seconds from the process start to its first answer (reported, not asserted)."""
    admin: Account | None = None
    users: list[str] = field(default_factory=list)

    def request(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def register(
        self, name: str | None = None, *, admin: bool = False, limit: tuple[int, int] | None = (0, 0)
    ) -> Account:
        """A new user, named uniquely (``name`` is a readable prefix). ``limit``: its
        ``override_ratelimit`` (messages per second, burst; ``(0, 0)`` is none), None: the default."""
        localpart = f"{name or 'u'}{next(_names)}x{uuid.uuid4().hex[:6]}"
        nonce = self.request("GET", "/_synapse/admin/v1/register")["nonce"]
        password = f"pw-{uuid.uuid4().hex}"
        mac = hmac.new(SECRET.encode(), digestmod=hashlib.sha1)
        mac.update(
            b"\x00".join(
                [nonce.encode(), localpart.encode(), password.encode(), b"admin" if admin else b"notadmin"]
            )
        )
        body = {"nonce": nonce, "username": localpart, "password": password, "admin": admin}
        made = self.request("POST", "/_synapse/admin/v1/register", {**body, "mac": mac.hexdigest()})
        account = Account(made["user_id"], made["access_token"], password)
        if limit is not None and self.admin is not None:
            self.set_limit(account.user_id, *limit)
        return account

    def set_limit(self, user_id: str, per_second: int, burst: int) -> None:
        assert self.admin is not None
        where = f"/_synapse/admin/v1/users/{urllib.request.quote(user_id)}/override_ratelimit"
        self.request(
            "POST", where, {"messages_per_second": per_second, "burst_count": burst}, self.admin.token
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self) -> str:
        path = self.data / "homeserver.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else "(no log)"


def _signing_key(path: Path) -> None:
    """The server's ed25519 signing key, written as Synapse's ``--generate-keys`` would (without a
    second interpreter loading all of Synapse for it)."""
    from signedjson.key import generate_signing_key, write_signing_keys  # Synapse's own dependency

    with path.open("w") as out:
        write_signing_keys(out, [generate_signing_key("a_test")])


def start_synapse(data: Path, port: int) -> Synapse:
    data.mkdir(parents=True, exist_ok=True)
    (data / "log.yaml").write_text(LOG_CONFIG.replace("LOGFILE", str(data / "homeserver.log")))
    path = data / "homeserver.yaml"
    path.write_text(json.dumps(config(data, port)))  # JSON is YAML
    python = [sys.executable, "-m", "synapse.app.homeserver", "--config-path", str(path)]
    _signing_key(data / "signing.key")
    out = (data / "stdout.log").open("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    started = time.monotonic()
    proc = subprocess.Popen(python, stdout=out, stderr=subprocess.STDOUT, cwd=data, env=env)
    out.close()
    server = Synapse(f"http://127.0.0.1:{port}", data, proc, 0.0)
    while True:
        try:
            server.request("GET", "/_matrix/client/versions")
            break
        except (urllib.error.URLError, OSError):
            if proc.poll() is not None or time.monotonic() - started > READY_TIMEOUT:
                server.stop()
                tail = (data / "stdout.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"Synapse did not start: {tail}\n{server.log_tail()}") from None
            time.sleep(0.05)
    server.started_in = time.monotonic() - started
    server.admin = server.register("admin", admin=True, limit=None)
    server.set_limit(server.admin.user_id, 0, 0)
    return server
