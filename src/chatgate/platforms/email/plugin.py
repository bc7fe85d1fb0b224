"""Email as a platform plugin: its section, its password, who may write, its questions and its build."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from chatgate.domain.access import PlatformAccess
from chatgate.engine.ports import PlatformContext
from chatgate.platforms.email.section import EmailSection
from chatgate.platforms.kit.conform import conform
from chatgate.platforms.kit.init import InitAnswers, Prompter, split_list
from chatgate.platforms.kit.plugin import CoreView, Credential, Extra, PlatformBuild, Plugin, Secret

PASSWORD_FROM = "the mailbox password (an app password where the provider has them)"


class EmailPlugin(Plugin[EmailSection]):
    name = "email"
    title = "Email"
    section = EmailSection
    # aioimaplib: IMAP with IDLE on asyncio; aiosmtplib: SMTP on asyncio (measured: commit message)
    extra = Extra("email", ("aioimaplib", "aiosmtplib"))
    doc = "docs/platforms/email.md"
    summary = "a mailbox (IMAP IDLE in, SMTP out; each thread is a conversation)"

    def secrets(self, section: EmailSection) -> list[Secret]:
        found = [Secret("password_env", section.password_env, PASSWORD_FROM)]
        if section.smtp_password_env:
            found.append(Secret("smtp_password_env", section.smtp_password_env, "the SMTP password"))
        return found

    def access(self, section: EmailSection, core: CoreView) -> dict[str, PlatformAccess]:
        """``allow_from``: addresses are users; ``@domain`` entries allow every address there."""
        entries = [e.strip().lower() for e in section.allow_from]
        users = frozenset(e for e in entries if not e.startswith("@"))
        domains = frozenset(e for e in entries if e.startswith("@"))
        return {self.name: PlatformAccess(section.allow_all, users, section.pairing, domains)}

    def build(self, section: EmailSection, ctx: PlatformContext) -> PlatformBuild:
        from chatgate.platforms.email.adapter import EmailAdapter  # the adapter; its libraries at start

        password = ctx.secret(section.password_env) or ""
        smtp_password = ctx.secret(section.smtp_password_env) or password
        adapter = EmailAdapter(
            section, password, smtp_password, ctx.store, ctx.intake, duplicate_marker=ctx.duplicate_marker
        )
        mailbox = f"{section.login}@{section.imap_host}:{section.imap_port}/{section.mailbox}"
        return PlatformBuild(adapters=[adapter], credentials=[Credential("email", mailbox, "mailbox")])

    def live_check(self, section: EmailSection, environ: Mapping[str, str]) -> str | None:
        from chatgate.platforms.email.checks import check_mailbox  # imaplib: doctor and init only

        return check_mailbox(section, environ.get(section.password_env or "", ""))

    # ------------------------------------------------------------ chatgate init

    def init_access(self, values: dict[str, Any], pairing: bool, allow_users: list[str]) -> None:
        values.update(pairing=pairing, allow_from=list(allow_users))

    def init_current_access(self, current: Mapping[str, Any]) -> tuple[bool, list[str]] | None:
        users = [str(u) for u in current.get("allow_from") or []]
        if not current.get("enabled"):
            return None
        return bool(current.get("pairing")) or not users, users

    def init_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--email-address", help="the mailbox's address (replies come from it)")
        parser.add_argument("--email-imap-host", help="the IMAP server (implicit TLS, port 993)")
        parser.add_argument("--email-smtp-host", help="the SMTP server (STARTTLS on 587 by default)")
        parser.add_argument("--email-password-env", help="the environment variable holding the password")
        parser.add_argument(
            "--email-allow-from", help="addresses or @domains allowed to write (comma-separated)"
        )

    def init_ask(self, p: Prompter, current: Mapping[str, Any], args: argparse.Namespace) -> InitAnswers:
        from chatgate.platforms.email.checks import PROVIDERS, check_mailbox  # imaplib: init only

        p.say("  email: a mailbox of its own for the agent; with 2-step sign-in, make an app password")
        address = p.until_valid(
            args.email_address, "  The mailbox's address", str(current.get("address") or ""), _address
        )
        domain = address.rpartition("@")[2]
        known = PROVIDERS.get(domain, (f"imap.{domain}", f"smtp.{domain}"))
        imap_host = p.pick(args.email_imap_host, "  IMAP server", str(current.get("imap_host") or known[0]))
        smtp_host = p.pick(args.email_smtp_host, "  SMTP server", str(current.get("smtp_host") or known[1]))
        env = p.env_name(
            args.email_password_env,
            "  Environment variable holding the password",
            str(current.get("password_env") or "EMAIL_PASSWORD"),
        )
        values: dict[str, Any] = {
            "address": address,
            "imap_host": imap_host,
            "smtp_host": smtp_host,
            "password_env": env,
        }
        for key in ("imap_port", "imap_security", "smtp_port", "smtp_security", "imap_user"):
            if key in current:
                values[key] = current[key]
        if args.email_allow_from:
            values["allow_from"] = split_list(args.email_allow_from)
        answers = InitAnswers(section=values, secrets=[env])
        section = conform(EmailSection, {"enabled": True, **values})
        p.checked_secret(
            env, "the mailbox password", "Email", lambda password: check_mailbox(section, password)
        )
        return answers


def _address(value: str) -> str:
    address = value.strip().lower()
    local, at, domain = address.partition("@")
    if not local or not at or "." not in domain:
        raise ValueError("an address like agent@example.com is needed")
    return address


PLUGIN = EmailPlugin()
