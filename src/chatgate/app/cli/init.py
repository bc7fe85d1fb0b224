"""``chatgate init``: from nothing to a checked, commented config in one guided command.

It asks for the agent, the platforms (each only what it needs) and who may talk, checks
every credential it can against the real service (an OpenAI-compatible ``/models``,
each platform's own, through its plugin), validates the result with ``load_config`` before writing it, and
offers the user service. Every question has a flag, so a script runs it with ``--yes``;
a re-run offers the file's current values as the defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from chatgate.app import registry
from chatgate.app.cli import service
from chatgate.app.cli.common import early_state_dir
from chatgate.app.cli.init_checks import openai_models
from chatgate.app.cli.init_render import Answers, answers_from, current_sections, merged, render
from chatgate.app.config import ConfigError, GatewayConfig, load_config
from chatgate.app.config.envfile import env_file_path, save_secrets
from chatgate.app.config.extras import check_extras
from chatgate.platforms.kit.init import Aborted, CheckFailed, Prompter, split_list

EX_USAGE = 2


def ask_agent(p: Prompter, a: Answers, args: argparse.Namespace) -> None:
    p.say("\n1. The agent: who answers the messages")
    a.agent = p.pick(
        args.agent,
        "Agent: echo (offline test agent) or openai (any OpenAI-compatible API)",
        a.agent,
        ("echo", "openai"),
    )
    if a.agent != "openai":
        return
    while not _endpoint_answers(p, a, args):
        p.say("  Then correct them (your answers are the defaults; Enter keeps one):")
        p.pasted.pop(a.openai_key_env, None)
    a.openai_model = p.pick(args.openai_model, "Model", a.openai_model)


def _endpoint_answers(p: Prompter, a: Answers, args: argparse.Namespace) -> bool:
    """Ask the endpoint and its key and check them; False: the check failed and the person chose
    to correct them (asked again, nothing else lost). A scripted run, or one with nothing left
    to change (the URL given by flag, the key not pasted), stops with the reason."""
    a.openai_base_url = p.until_valid(
        args.openai_base_url, "Base URL of the endpoint", a.openai_base_url, _http_url
    )
    a.openai_key_env = p.env_name(
        args.openai_key_env, "Environment variable holding the API key", a.openai_key_env
    )
    key = p.secret(a.openai_key_env, "the API key")
    if not key:
        return True
    try:
        models = openai_models(a.openai_base_url, key)
    except CheckFailed as exc:
        p.say(f"  The endpoint check failed: {exc}")
        if p.interactive and p.confirm("Keep these settings anyway?", False):
            return True
        fixed = args.openai_base_url is not None and a.openai_key_env not in p.pasted
        if not p.interactive or fixed:
            raise Aborted(f"the agent endpoint did not pass its check: {exc}") from None
        return False
    shown = ", ".join(models[:20]) + (f" (and {len(models) - 20} more)" if len(models) > 20 else "")
    p.say(f"  The endpoint answers; models: {shown or '(none listed)'}")
    if models and a.openai_model not in models and args.openai_model is None:
        a.openai_model = models[0]
    return True


def ask_platforms(p: Prompter, a: Answers, args: argparse.Namespace, existing: dict[str, Any]) -> None:
    p.say("\n2. Platforms: where people chat with it")
    for name in registry.names():
        p.say(f"  {name}: {registry.plugin(name).summary}")
    flag = ",".join(args.platform) if args.platform else None
    a.platforms = p.until_valid(flag, "Platforms, comma-separated", ",".join(a.platforms), _platforms)
    current = current_sections(existing)
    for name in a.platforms:
        a.sections[name] = registry.plugin(name).init_ask(p, current[name], args)


def _platforms(text: str) -> list[str]:
    chosen = list(dict.fromkeys(name.lower() for name in split_list(text)))
    for name in chosen:
        if name not in registry.PLUGINS:
            raise ValueError(registry.unknown(name))
    if not chosen:
        raise ValueError(f"choose at least one of: {', '.join(registry.names())}")
    return chosen


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:11434/v1)")
    return value


def ask_access(p: Prompter, a: Answers, args: argparse.Namespace) -> None:
    asked = a.asking_access()
    if not asked:
        return
    p.say("\n3. Who may talk (on " + ", ".join(asked) + ")")
    a.allow = p.pick(
        args.allow,
        "pairing (a stranger gets a code you approve) or allowlist (only listed user ids)",
        a.allow,
        ("pairing", "allowlist"),
    )
    users = ",".join(args.allow_user) if args.allow_user else None
    question = (
        "User ids let in without a code (comma-separated, optional)"
        if a.allow == "pairing"
        else "User ids allowed"
    )
    a.allow_users = p.until_valid(users, question, ",".join(a.allow_users), split_list)
    if a.allow == "allowlist" and not a.allow_users:
        p.say("  Nobody is on the allowlist yet: every message there is refused until you add ids.")


@contextlib.contextmanager
def _placeholders(names: list[str]) -> Iterator[None]:
    """Unset secret variables get a placeholder while validating: their absence is reported, not fatal."""
    missing = [name for name in names if not os.environ.get(name)]
    for name in missing:
        os.environ[name] = "placeholder-for-validation"
    try:
        yield
    finally:
        for name in missing:
            os.environ.pop(name, None)


def validated(text: str, where: Path, secrets: list[str]) -> GatewayConfig:
    """Load the text exactly as the gateway will (``load_config``) from a file beside the target."""
    with tempfile.NamedTemporaryFile("w", dir=where.parent, suffix=".yaml", delete=False) as tmp:
        tmp.write(text)
    try:
        with _placeholders(secrets):
            return load_config(Path(tmp.name), check_installed=False)
    finally:
        os.unlink(tmp.name)


def _existing(path: Path) -> dict[str, Any]:
    import yaml

    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise Aborted(
            f"{path} is not valid YAML ({exc}); fix or move it, then run chatgate init again"
        ) from None
    return data if isinstance(data, dict) else {}


def _offer_service(p: Prompter, args: argparse.Namespace, path: Path, state_dir: Path) -> None:
    wanted = (
        args.service
        if args.service is not None
        else (
            p.interactive
            and p.confirm("\nInstall a user service so chatgate starts at login (systemd)?", False)
        )
    )
    if not wanted:
        return
    service_args = argparse.Namespace(config=str(path), print_only=False)
    service.cmd_install(service_args, state_dir)


def _save_secrets(p: Prompter, a: Answers, secrets_file: Path) -> None:
    """The pasted secrets into the secrets file (kept private); say which are still missing."""
    if p.pasted:
        try:
            save_secrets(secrets_file, p.pasted)
        except (OSError, ValueError) as exc:
            raise Aborted(f"the config was written, but the secrets could not be saved: {exc}") from None
        p.say(f"Saved {', '.join(sorted(p.pasted))} to {secrets_file} (mode 0600; never shown).")
    named = dict.fromkeys(a.secrets())
    missing = [name for name in named if name not in p.pasted and not os.environ.get(name)]
    if missing:
        lines = ", ".join(f"{name}=..." for name in missing)
        p.say(f"Before chatgate run, add to {secrets_file} (chmod 600): {lines}")


def run_wizard(args: argparse.Namespace) -> int:
    path = Path(args.write).expanduser().resolve()
    secrets_file = env_file_path(early_state_dir(args))
    p = Prompter(interactive=not args.yes, environ=os.environ, secrets_file=str(secrets_file))
    existing = _existing(path)
    a = answers_from(existing)
    p.say(f"chatgate init: writing {path}" + (" (current values are the defaults)" if existing else ""))
    ask_agent(p, a, args)
    ask_platforms(p, a, args, existing)
    ask_access(p, a, args)
    text = render(merged(existing, a), str(path))
    try:
        config = validated(text, path, a.secrets())
    except ConfigError as exc:
        raise Aborted(f"the config would not load, so it was not written:\n{exc}") from None
    if (needs := check_extras(config)) is not None:
        p.say(f"  Before chatgate run: {needs.split(': ', 1)[1]}")
    p.say(
        f"\nagent {config.agent.kind}; platforms {', '.join(a.platforms)}"
        + (f"; access {a.allow}" if a.asking_access() else "")
    )
    if p.interactive and not p.confirm(f"Write {path}?", True):
        raise Aborted("not written")
    path.write_text(text, encoding="utf-8")
    p.say(f"Wrote {path}.")
    _save_secrets(p, a, secrets_file)
    _offer_service(p, args, path, secrets_file.parent)
    run = f"chatgate run --config {path}"
    p.say(f"\nStart it:  {run}")
    http = f"http://{config.http.host}:{config.http.port}"
    for answers in a.sections.values():
        for note in answers.notes:
            p.say(note.replace("{http}", http))
    if a.allow == "pairing" and a.asking_access():
        p.say("A stranger who writes to the bot gets a code; approve it with: chatgate pairing approve CODE")
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    try:
        return run_wizard(args)
    except Aborted as exc:
        print(f"chatgate init: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nchatgate init: stopped; nothing was written", file=sys.stderr)
        return 130


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], run: Callable[[argparse.Namespace], int]
) -> None:
    init = sub.add_parser(
        "init", help="guided setup: agent, platforms, who may talk; writes a checked config"
    )
    init.add_argument(
        "--write", default="chatgate.yaml", help="the config file to write (default: ./chatgate.yaml)"
    )
    init.add_argument(
        "--yes", action="store_true", help="ask nothing: take the flags, else the current values or defaults"
    )
    init.add_argument("--agent", help="echo or openai")
    init.add_argument(
        "--openai-base-url", help="an OpenAI-compatible endpoint (default https://api.openai.com/v1)"
    )
    init.add_argument("--openai-model", help="the model to use")
    init.add_argument("--openai-key-env", help="the environment variable holding the API key")
    init.add_argument("--platform", action="append", help=f"{', '.join(registry.names())} (repeat for more)")
    for name in registry.names():
        registry.plugin(name).init_arguments(init)
    init.add_argument("--allow", help="pairing or allowlist: who may talk on the chat platforms")
    init.add_argument(
        "--allow-user", action="append", help="a user id let in without a code (repeat for more)"
    )
    init.add_argument(
        "--service",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="install the systemd user service (default: ask)",
    )
    init.add_argument("--state-dir", help="the state dir the service runs with")
    init.set_defaults(func=run)
