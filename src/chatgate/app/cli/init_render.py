"""The answers of ``chatgate init`` and the commented YAML they become.

A re-run starts from the file it wrote: ``answers_from`` reads the current values as the
defaults, and ``render`` merges the answers into the existing file's keys, so settings
the wizard does not ask about (tools, approvals, timeouts) are kept.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml

NATIVE = ("web", "telegram", "relay")
VIA_RELAY = ("discord", "slack")
"""Platforms chatgate reaches through a relay connector only (no native adapter yet)."""


@dataclass(slots=True)
class Answers:
    agent: str = "echo"
    openai_base_url: str = "https://api.openai.com/v1"
    openai_model: str = "gpt-4o-mini"
    openai_key_env: str = "OPENAI_API_KEY"
    platforms: list[str] = field(default_factory=lambda: ["web"])
    telegram_token_env: str = "TELEGRAM_BOT_TOKEN"
    telegram_api_base: str = "https://api.telegram.org"
    relay_url: str = ""
    relay_gateway_id: str = ""
    relay_secret_env: str = "CHATGATE_RELAY_SECRET"
    relay_fronted: list[str] = field(default_factory=lambda: ["discord"])
    relay_bot_ids: dict[str, str] = field(default_factory=dict)
    allow: str = "pairing"
    allow_users: list[str] = field(default_factory=list)


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def answers_from(data: dict[str, Any]) -> Answers:
    """The values an existing config holds, as the defaults of a re-run."""
    a = Answers()
    a.agent = str(_get(data, "agent", "kind") or a.agent).lower()
    for attr, key in (
        ("openai_base_url", "base_url"),
        ("openai_model", "model"),
        ("openai_key_env", "api_key_env"),
    ):
        setattr(a, attr, str(_get(data, "agent", "openai", key) or getattr(a, attr)))
    platforms = [] if _get(data, "platforms", "web", "enabled") is False else ["web"]
    telegram = _get(data, "platforms", "telegram") or {}
    if telegram.get("enabled"):
        platforms.append("telegram")
    a.telegram_token_env = str(telegram.get("token_env") or a.telegram_token_env)
    a.telegram_api_base = str(telegram.get("api_base") or a.telegram_api_base)
    relay = _get(data, "platforms", "relay") or {}
    if relay.get("enabled"):
        platforms.append("relay")
    a.platforms = platforms
    a.relay_url = str(relay.get("url") or "")
    a.relay_gateway_id = str(relay.get("gateway_id") or "")
    a.relay_secret_env = str(relay.get("secret_env") or a.relay_secret_env)
    fronted = [p for p in relay.get("platforms") or [] if isinstance(p, dict) and p.get("platform")]
    if fronted:
        a.relay_fronted = [str(p["platform"]) for p in fronted]
        a.relay_bot_ids = {str(p["platform"]): str(p.get("bot_id") or "") for p in fronted}
    section = telegram if telegram.get("enabled") else (fronted[0] if fronted else {})
    if section.get("allow_users") and not section.get("pairing"):
        a.allow = "allowlist"
    a.allow_users = [str(u) for u in section.get("allow_users") or []]
    return a


def _access(a: Answers) -> dict[str, Any]:
    return {"pairing": a.allow == "pairing", "allow_users": list(a.allow_users)}


def merged(existing: dict[str, Any], a: Answers) -> dict[str, Any]:
    """The existing file's keys with the answers written over the ones the wizard owns."""
    data = copy.deepcopy(existing)
    agent = data.setdefault("agent", {})
    agent["kind"] = a.agent
    if a.agent == "openai":
        agent.setdefault("openai", {}).update(
            base_url=a.openai_base_url, model=a.openai_model, api_key_env=a.openai_key_env
        )
    platforms = data.setdefault("platforms", {})
    platforms.setdefault("web", {})["enabled"] = "web" in a.platforms
    telegram = platforms.setdefault("telegram", {})
    telegram["enabled"] = "telegram" in a.platforms
    if telegram["enabled"]:
        telegram.update(token_env=a.telegram_token_env, **_access(a))
        if a.telegram_api_base != Answers().telegram_api_base or "api_base" in telegram:
            telegram["api_base"] = a.telegram_api_base
    relay = platforms.setdefault("relay", {})
    relay["enabled"] = "relay" in a.platforms
    if relay["enabled"]:
        relay.update(url=a.relay_url, gateway_id=a.relay_gateway_id, secret_env=a.relay_secret_env)
        relay["platforms"] = [
            {"platform": name, "bot_id": a.relay_bot_ids.get(name, ""), **_access(a)}
            for name in a.relay_fronted
        ]
    return data


COMMENTS = {
    "agent": "Who answers: 'echo' (offline, repeats you) or 'openai' (any OpenAI-compatible endpoint).\n"
    "The API key is read from the environment variable named by api_key_env, never from this file.",
    "platforms": "Where people chat. web: the built-in chat at http://<http.host>:<http.port>/.\n"
    "telegram / relay: 'pairing: true' sends a stranger who writes in a DM a one-time code;\n"
    "approve it with `chatgate pairing approve CODE`. allow_users are let in without one.",
    "http": "The web chat, /healthz, /status and /metrics listen here (loopback by default).",
}
HEADER = (
    "# chatgate configuration, written by `chatgate init` (run it again to change these answers;\n"
    "# keys it does not ask about are kept). Every key and its default: docs/configuration.md\n"
    "# Check it with: chatgate config check {path}\n"
)


def render(data: dict[str, Any], path: str) -> str:
    """YAML with a comment above each section the wizard explains, in a stable order."""
    order = ["agent", "platforms", *(k for k in data if k not in ("agent", "platforms"))]
    parts = [HEADER.format(path=path)]
    for key in order:
        if key not in data:
            continue
        comment = COMMENTS.get(key)
        if comment:
            parts.append("\n" + "".join(f"# {line}\n" for line in comment.splitlines()))
        else:
            parts.append("\n")
        parts.append(yaml.safe_dump({key: data[key]}, sort_keys=False, allow_unicode=True))
    return "".join(parts)
