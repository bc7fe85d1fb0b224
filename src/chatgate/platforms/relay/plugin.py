"""The relay connector as a platform plugin: one section, several fronted platforms."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from chatgate.domain.access import PlatformAccess
from chatgate.domain.commands import CONTROL_COMMANDS
from chatgate.domain.errors import ConfigError
from chatgate.engine.ports import PlatformContext
from chatgate.platforms.kit.conform import conform
from chatgate.platforms.kit.init import InitAnswers, Prompter, split_list
from chatgate.platforms.kit.plugin import CoreView, Credential, PlatformBuild, Plugin, Secret
from chatgate.platforms.relay.section import RelaySection

SECRET_FROM = "the secret the connector issued when you enrolled this gateway"


class RelayPlugin(Plugin[RelaySection]):
    name = "relay"
    title = "the relay connector"
    section = RelaySection
    doc = "docs/relay-protocol.md"
    summary = "a relay connector (Hermes relay contract v1) that fronts other platforms for this gateway"

    def platforms(self, section: RelaySection) -> tuple[str, ...]:
        return tuple(p.name for p in section.platforms)

    def secrets(self, section: RelaySection) -> list[Secret]:
        return [Secret("secret_env", section.secret_env, SECRET_FROM)]

    def check(self, section: RelaySection, environ: Mapping[str, str], core: CoreView) -> None:
        for key in ("url", "gateway_id", "secret_env"):
            if not getattr(section, key):
                raise ConfigError(f"platforms.relay.{key}: required when platforms.relay.enabled is true")
        assert section.gateway_id is not None and section.url is not None
        if ":" in section.gateway_id:
            raise ConfigError(
                "platforms.relay.gateway_id: must not contain ':' (it is part of the signed token)"
            )
        if not section.url.startswith(("ws://", "wss://", "http://", "https://")):
            raise ConfigError("platforms.relay.url: must start with ws://, wss://, http:// or https://")
        super().check(section, environ, core)
        names = list(self.platforms(section))
        if not names:
            raise ConfigError("platforms.relay.platforms: name at least one fronted platform (e.g. discord)")
        for index, name in enumerate(names):
            where = f"platforms.relay.platforms.{index}"
            if not name or names.index(name) != index:
                raise ConfigError(f"{where}.platform: {name or '(empty)'} is empty or listed twice")
            if not section.platforms[index].bot_id.strip():
                raise ConfigError(
                    f"{where}.bot_id: required; the bot id the connector knows this platform's bot by"
                    " (it validates every hello against platform:botId)"
                )
        if section.outbound_timeout_seconds >= core.send_timeout:
            raise ConfigError(
                f"platforms.relay.outbound_timeout_seconds: {section.outbound_timeout_seconds:g} s is not"
                f" below delivery.send_timeout_seconds ({core.send_timeout:g} s); a missing result would"
                " not be recorded as ambiguous"
            )

    def access(self, section: RelaySection, core: CoreView) -> dict[str, PlatformAccess]:
        return {
            p.name: PlatformAccess(
                allow_all=p.allow_all, allow_users=frozenset(p.allow_users), pairing=p.pairing
            )
            for p in section.platforms
        }

    def build(self, section: RelaySection, ctx: PlatformContext) -> PlatformBuild:
        from chatgate.platforms.relay.adapter import RelayHub  # websockets, the frames
        from chatgate.platforms.relay.connection import RelaySettings, dial_url

        assert section.url and section.gateway_id  # check() refused the config otherwise
        settings = RelaySettings(
            url=section.url,
            gateway_id=section.gateway_id,
            secret=ctx.secret(section.secret_env) or "",
            identities=tuple((p.name, p.bot_id) for p in section.platforms),
            outbound_timeout=section.outbound_timeout_seconds,
            handshake_timeout=section.handshake_timeout_seconds,
            reconnect_initial=section.reconnect_initial_seconds,
            reconnect_max=section.reconnect_max_seconds,
            going_idle_timeout=section.going_idle_timeout_seconds,
            token_ttl=section.token_ttl_seconds,
            allow_private_urls=section.allow_private_urls,
            # The connector keeps Discord's registered slash commands in step with what we answer.
            command_manifest=tuple({"name": c.name, "description": c.summary} for c in CONTROL_COMMANDS),
        )
        hub = RelayHub(
            settings,
            ctx.intake,
            interrupt=ctx.interrupt,
            duplicate_marker=ctx.duplicate_marker,
            on_bad_frame=lambda reason: ctx.count_refused("relay", "rejected_frame"),
        )
        # Keyed by the normalized dial target: http://h and ws://h/relay are the same relay identity.
        credential = Credential(
            "relay", f"{dial_url(settings.url)}|{settings.gateway_id}", "relay gateway id"
        )
        return PlatformBuild(adapters=list(hub.platforms.values()), credentials=[credential])

    live_check_displaces = True  # a second connection with this gateway id would replace the gateway's

    def live_check(self, section: RelaySection, environ: Mapping[str, str]) -> str | None:
        from chatgate.platforms.relay.probe import hello  # websockets: only when checked

        return hello(section, environ.get(section.secret_env or "", ""))

    # ------------------------------------------------------------ chatgate init

    def init_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--relay-url", help="the relay connector's URL")
        parser.add_argument("--relay-gateway-id", help="the gateway id the connector enrolled")
        parser.add_argument("--relay-secret-env", help="the environment variable holding the relay secret")
        parser.add_argument("--relay-platform", action="append", help="a platform the connector fronts")
        parser.add_argument("--relay-bot-id", help="the fronted platform's bot id (with one platform)")

    def init_ask(self, p: Prompter, current: Mapping[str, Any], args: argparse.Namespace) -> InitAnswers:
        p.say("  relay: a relay connector fronts other platforms for this gateway (docs/relay-protocol.md)")
        url = p.until_valid(
            args.relay_url, "  Connector URL (wss://... or http://...)", str(current.get("url") or ""), _url
        )
        gateway_id = p.until_valid(
            args.relay_gateway_id,
            "  Gateway id the connector enrolled",
            str(current.get("gateway_id") or ""),
            _gateway_id,
        )
        secret = p.env_name(
            args.relay_secret_env,
            "  Environment variable holding the relay secret",
            str(current.get("secret_env") or "CHATGATE_RELAY_SECRET"),
        )
        fronted = [e for e in current.get("platforms") or [] if isinstance(e, dict) and e.get("platform")]
        known = {str(e["platform"]): e for e in fronted}
        flag = ",".join(args.relay_platform) if args.relay_platform else None
        names = p.until_valid(
            flag, "  Platforms the connector fronts (comma-separated)", ",".join(known) or "discord", _names
        )
        entries = []
        for name in names:
            bot_flag = args.relay_bot_id if len(names) == 1 else None
            default = str(known.get(name, {}).get("bot_id") or "")
            bot_id = p.until_valid(
                bot_flag, f"  {name} bot id (as the connector knows it)", default, _required
            )
            entries.append({**known.get(name, {}), "platform": name, "bot_id": bot_id})
        values = {"url": url, "gateway_id": gateway_id, "secret_env": secret, "platforms": entries}
        from chatgate.platforms.relay.probe import hello  # websockets: only when checked

        section = conform(RelaySection, {"enabled": True, **values})
        p.checked_secret(secret, "the relay secret", "Relay", lambda value: hello(section, value))
        return InitAnswers(section=values, secrets=[secret])

    def init_access(self, values: dict[str, Any], pairing: bool, allow_users: list[str]) -> None:
        for entry in values.get("platforms") or []:
            entry.update(pairing=pairing, allow_users=list(allow_users))

    def init_current_access(self, current: Mapping[str, Any]) -> tuple[bool, list[str]] | None:
        fronted = [e for e in current.get("platforms") or [] if isinstance(e, dict)]
        return (
            super().init_current_access({"enabled": current.get("enabled"), **fronted[0]})
            if fronted
            else None
        )


def _url(value: str) -> str:
    if not value.startswith(("ws://", "wss://", "http://", "https://")):
        raise ValueError("the URL must start with ws://, wss://, http:// or https://")
    return value


def _gateway_id(value: str) -> str:
    if not value or ":" in value:
        raise ValueError("a gateway id is needed, without ':' (it is part of the signed token)")
    return value


def _names(value: str) -> list[str]:
    names = [n.lower() for n in split_list(value)]
    if not names:
        raise ValueError("name at least one platform (e.g. discord)")
    return list(dict.fromkeys(names))


def _required(value: str) -> str:
    if not value.strip():
        raise ValueError("this is required")
    return value.strip()


PLUGIN = RelayPlugin()
