"""The answers of ``chatgate init`` and the commented YAML they become.

A re-run starts from the file it wrote: ``answers_from`` reads the current values as the
defaults, and ``merged`` writes the answers over the existing file's keys, so settings the
wizard does not ask about (tools, approvals, timeouts) are kept. The platforms' own keys
are their plugins' answers (``Plugin.init_ask``); this module names no platform.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import yaml

from chatgate.app import registry
from chatgate.platforms.kit.init import InitAnswers


class Answers(msgspec.Struct):
    agent: str = "echo"
    openai_base_url: str = "https://api.openai.com/v1"
    openai_model: str = "gpt-4o-mini"
    openai_key_env: str = "OPENAI_API_KEY"
    platforms: list[str] = msgspec.field(default_factory=lambda: list(registry.ON_BY_DEFAULT))
    sections: dict[str, InitAnswers] = msgspec.field(default_factory=dict)
    """Each chosen platform's answers, by section name."""
    allow: str = "pairing"
    allow_users: list[str] = msgspec.field(default_factory=list)

    def secrets(self) -> list[str]:
        """Every variable the answers name (placeholders while the result is validated)."""
        names = [self.openai_key_env] if self.agent == "openai" else []
        return names + [name for answers in self.sections.values() for name in answers.secrets]

    def asking_access(self) -> list[str]:
        """The chosen platforms the "who may talk" question is for."""
        return [name for name in self.platforms if registry.plugin(name).asks_access]


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def current_sections(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The file's platform sections, with ``enabled`` as the gateway reads it (defaults applied)."""
    written = _get(data, "platforms") or {}
    sections: dict[str, dict[str, Any]] = {}
    for name in registry.names():
        found = written.get(name)
        section: dict[str, Any] = found if isinstance(found, dict) else {}
        enabled = section.get("enabled", name in registry.ON_BY_DEFAULT)
        sections[name] = {**section, "enabled": enabled is not False and enabled is not None}
    return sections


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
    sections = current_sections(data)
    a.platforms = [name for name, section in sections.items() if section["enabled"]]
    for name in a.platforms:
        plugin = registry.plugin(name)
        access = plugin.init_current_access(sections[name]) if plugin.asks_access else None
        if access is not None:
            pairing, users = access
            a.allow, a.allow_users = ("pairing" if pairing else "allowlist"), users
            break
    return a


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
    for name in registry.names():
        chosen = name in a.platforms
        if not chosen and name not in platforms and name not in registry.ON_BY_DEFAULT:
            continue  # never configured: nothing to write
        section = platforms.setdefault(name, {})
        section["enabled"] = chosen
        answers = a.sections.get(name)
        if chosen and answers is not None:
            section.update(copy.deepcopy(answers.section))
            if registry.plugin(name).asks_access:
                registry.plugin(name).init_access(section, a.allow == "pairing", a.allow_users)
    return data


COMMENTS = {
    "agent": "Who answers: 'echo' (offline, repeats you) or 'openai' (any OpenAI-compatible endpoint).\n"
    "The API key is read from the environment variable named by api_key_env, never from this file.",
    "platforms": "Where people chat: one section per platform (docs/configuration.md).\n"
    "'pairing: true' sends a stranger who writes in a DM a one-time code;\n"
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
