"""Real mail servers on loopback for the email tests: Dovecot (IMAP and LMTP) and an SMTP server.

Dovecot (Debian's ``dovecot-imapd`` and ``dovecot-lmtpd``) runs as an unprivileged process
started here: its own config, a throwaway ``passwd-file`` user database (a file per user)
and maildirs in a temp dir, IMAP on a free loopback port, LMTP on a unix socket, no TLS.
Run as root (CI), it is started as ``nobody``; otherwise as the user running the tests.
The SMTP server is aiosmtpd (PyPI): it accepts a message only once Dovecot has delivered it
over LMTP to every local recipient, as a submission server with local delivery does (``250``
means it is in the mailbox). Users are added per test (``add_user``), so one pair of servers
per xdist worker serves every test.
"""

from __future__ import annotations

import asyncio
import email.policy
import grp
import imaplib
import os
import pwd
import shutil
import signal
import smtplib
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

from support.procs import free_port

PASSWORD = "secret-pw"
DOMAIN = "example.test"
CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
# a refused login answers at once: Dovecot's delays are not what the tests check
auth_failure_delay = 0
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
first_valid_uid = 1
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users/%u
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root}/users/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
  # no growing auth penalty for 127.0.0.1 (one server serves every test of a worker)
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service lmtp {{
  unix_listener lmtp {{
    mode = 0666
  }}
}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Sent {{
    auto = create
    special_use = \\Sent
  }}
}}
"""


def dovecot_missing() -> str | None:
    for tool in ("dovecot", "doveadm"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed (apt-get install dovecot-imapd dovecot-lmtpd; .ci/run does)"
    return None


@dataclass
class Accepted:
    """One message the SMTP server accepted (and Dovecot delivered)."""

    mail_from: str
    rcpt_tos: list[str]
    message_id: str


@dataclass
class MailServers:
    root: Path
    imap_port: int = 0
    smtp_port: int = 0
    accepted: list[Accepted] = field(default_factory=list)
    _proc: subprocess.Popen[bytes] | None = None
    _controller: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _users: int = 0

    # ------------------------------------------------------------ lifecycle

    def _identity(self) -> tuple[str, str, int, int]:
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            return "nobody", grp.getgrgid(nobody.pw_gid).gr_name, nobody.pw_uid, nobody.pw_gid
        me = pwd.getpwuid(os.getuid())
        return me.pw_name, grp.getgrgid(me.pw_gid).gr_name, me.pw_uid, me.pw_gid

    def start(self) -> None:
        user, group, uid, gid = self._identity()
        self.uid, self.gid = uid, gid
        for sub in ("run", "state", "mail", "users"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.imap_port = free_port()
        (self.root / "dovecot.conf").write_text(
            CONFIG.format(root=self.root, user=user, group=group, port=self.imap_port)
        )
        for path in [self.root, *self.root.rglob("*")]:
            os.chown(path, uid, gid)
        demote = None
        if os.geteuid() == 0:

            def demote() -> None:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)

        self._proc = subprocess.Popen(
            ["dovecot", "-F", "-c", str(self.root / "dovecot.conf")],
            stdout=(self.root / "dovecot.out").open("wb"),
            stderr=subprocess.STDOUT,
            preexec_fn=demote,
        )
        self._wait_port(self.imap_port)
        self._start_smtp()

    def _wait_port(self, port: int) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                if self._proc is not None and self._proc.poll() is not None:
                    raise RuntimeError(f"dovecot exited: {self.log()}") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"dovecot did not listen on {port}: {self.log()}") from None
                time.sleep(0.05)

    def _start_smtp(self) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult, LoginPassword

        def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
            ok = isinstance(data, LoginPassword) and data.password.decode() == PASSWORD
            return AuthResult(success=ok)

        self.smtp_port = free_port()
        self._controller = Controller(
            _LmtpRelay(self),
            hostname="127.0.0.1",
            port=self.smtp_port,
            authenticator=authenticate,
            auth_require_tls=False,
            auth_required=False,
        )
        self._controller.start()

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def log(self) -> str:
        parts = []
        for name in ("dovecot.out", "dovecot.log"):
            path = self.root / name
            if path.exists():
                parts.append(path.read_text(errors="replace")[-3000:])
        return "\n".join(parts)

    # ------------------------------------------------------------ users and mail

    def add_user(self, name: str) -> str:
        """A new mailbox ``<name>-<n>@example.test`` (unique across the worker's tests)."""
        with self._lock:
            self._users += 1
            address = f"{name}-{self._users}@{DOMAIN}"
            home = self.root / "mail" / address
            line = f"{address}:{{PLAIN}}{PASSWORD}:{self.uid}:{self.gid}::{home}::\n"
            # a passwd-file per user, written once: Dovecot never reads one while it changes
            path = self.root / "users" / address
            path.write_text(line)
            os.chown(path, self.uid, self.gid)
        return address

    def deliver_lmtp(self, mail_from: str, rcpt_tos: list[str], data: bytes) -> None:
        client = smtplib.LMTP(str(self.root / "run" / "lmtp"))
        try:
            client.sendmail(mail_from, rcpt_tos, data)
        finally:
            client.quit()

    def send(self, message: EmailMessage, mail_from: str | None = None) -> None:
        """Submit a mail over SMTP, as a person's mail client does."""
        with smtplib.SMTP("127.0.0.1", self.smtp_port, timeout=30) as client:
            client.send_message(message, from_addr=mail_from)

    def doveadm(self, *args: str) -> str:
        demote = None
        if os.geteuid() == 0:
            uid, gid = self.uid, self.gid

            def demote() -> None:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)

        done = subprocess.run(
            ["doveadm", "-c", str(self.root / "dovecot.conf"), *args],
            capture_output=True,
            text=True,
            timeout=30,
            preexec_fn=demote,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"doveadm {args}: {done.stderr}")
        return done.stdout

    def read(self, address: str, folder: str = "INBOX") -> list[EmailMessage]:
        """Every mail of a folder, read back over IMAP (in UID order)."""
        client = imaplib.IMAP4("127.0.0.1", self.imap_port, timeout=30)
        try:
            client.login(address, PASSWORD)
            client.select(f'"{folder}"', readonly=True)
            _status, data = client.uid("FETCH", "1:*", "(BODY.PEEK[])")
            found: list[EmailMessage] = []
            for item in data or []:
                if isinstance(item, tuple):
                    msg = BytesParser(policy=email.policy.default).parsebytes(item[1])
                    assert isinstance(msg, EmailMessage)
                    found.append(msg)
            return found
        finally:
            client.logout()

    def append(self, address: str, folder: str, message: EmailMessage, date: float) -> None:
        """Put a mail in a folder with the given INTERNALDATE (old mail, already there)."""
        client = imaplib.IMAP4("127.0.0.1", self.imap_port, timeout=30)
        try:
            client.login(address, PASSWORD)
            client.append(f'"{folder}"', None, imaplib.Time2Internaldate(date), message.as_bytes())
        finally:
            client.logout()

    def renumber(self, address: str) -> None:
        """Rebuild the inbox's index as a restore or a migration does: Dovecot then numbers every
        mail anew under a new UIDVALIDITY (the mails and their dates stay)."""
        maildir = self.root / "mail" / address
        for path in maildir.iterdir():
            if path.name == "dovecot-uidlist" or path.name.startswith("dovecot.index"):
                path.unlink()

    async def aread(self, address: str, folder: str = "INBOX") -> list[EmailMessage]:
        return await asyncio.to_thread(self.read, address, folder)


class _LmtpRelay:
    """aiosmtpd's handler: deliver over LMTP, then (only then) answer 250."""

    def __init__(self, servers: MailServers) -> None:
        self._servers = servers

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        data = envelope.original_content or envelope.content
        try:
            await asyncio.to_thread(self._servers.deliver_lmtp, envelope.mail_from, envelope.rcpt_tos, data)
        except smtplib.SMTPRecipientsRefused:
            return "550 5.1.1 no such user here"
        except (smtplib.SMTPException, OSError) as exc:
            return f"451 4.3.0 local delivery failed: {exc}"
        head = BytesParser(policy=email.policy.default).parsebytes(data, headersonly=True)
        with self._servers._lock:
            self._servers.accepted.append(
                Accepted(envelope.mail_from, list(envelope.rcpt_tos), str(head.get("Message-ID") or ""))
            )
        return "250 2.0.0 delivered"


def mail(
    sender: str,
    to: str,
    subject: str,
    text: str,
    message_id: str,
    *,
    in_reply_to: str | None = None,
    references: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = f"<{message_id}>"
    if in_reply_to:
        msg["In-Reply-To"] = f"<{in_reply_to}>"
    if references:
        msg["References"] = " ".join(f"<{r}>" for r in references)
    for name, value in (headers or {}).items():
        msg[name] = value
    msg.set_content(text)
    return msg


def email_section(servers: MailServers, bot: str, allow_from: list[str], **overrides: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "enabled": True,
        "address": bot,
        "password_env": "EMAIL_TEST_PASSWORD",
        "imap_host": "127.0.0.1",
        "imap_port": servers.imap_port,
        "imap_security": "none",
        "smtp_host": "127.0.0.1",
        "smtp_port": servers.smtp_port,
        "smtp_security": "none",
        "allow_from": allow_from,
        "poll_seconds": 5,
        "sends_per_minute": 6000,
        "replies_per_thread_per_hour": 1000,
    }
    section.update(overrides)
    return section
