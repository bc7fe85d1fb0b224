"""``chatgate init``: from nothing to a checked, commented config in one guided command.

It asks for the agent, the platforms (each only what it needs) and who may talk, checks
every credential it can against the real service (an OpenAI-compatible ``/models``,
Telegram's ``getMe``), validates the result with ``load_config`` before writing it, and
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

from chatgate.app.cli.init_render import NATIVE, VIA_RELAY, Answers, answers_from, merged, render
from chatgate.app.config import ConfigError, GatewayConfig, load_config
from chatgate.app.config.errors import env_var_name
from chatgate.app.config.extras import check_extras

EX_USAGE = 2


class Aborted(Exception):
    """The user stopped the wizard (Ctrl+D, or declined to write), or a --yes run cannot go on."""


class Prompter:
    """Questions on the terminal; with ``--yes`` every question takes its default silently."""

    def __init__(self, interactive: bool) -> None:
        self.interactive = interactive

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def ask(self, question: str, default: str = "") -> str:
        if not self.interactive:
            return default
        shown = f" [{default}]" if default else ""
        try:
            answer = input(f"{question}{shown}: ").strip()
        except EOFError:
            raise Aborted("no answer (end of input); nothing was written") from None
        return answer or default

    def confirm(self, question: str, default: bool) -> bool:
        answer = self.ask(f"{question} (y/n)", "y" if default else "n").lower()
        return answer.startswith("y")


def _pick(p: Prompter, flag: str | None, question: str, default: str, choices: tuple[str, ...] = ()) -> str:
    while True:
        value = flag if flag is not None else p.ask(question, default)
        if not choices or value.lower() in choices:
            return value.lower() if choices else value
        if flag is not None or not p.interactive:
            raise Aborted(f"{value!r} is not one of {', '.join(choices)}")
        p.say(f"  Please answer one of: {', '.join(choices)}")


def _env_name(p: Prompter, flag: str | None, question: str, default: str) -> str:
    while True:
        value = _pick(p, flag, question, default)
        try:
            name = env_var_name(value)
        except ValueError as exc:
            if flag is not None or not p.interactive:
                raise Aborted(f"{question}: {exc}") from None
            p.say(f"  {exc}")
            continue
        assert name is not None
        return name


def _list(text: str) -> list[str]:
    return [item.strip().lower() for item in text.replace(" ", ",").split(",") if item.strip()]


def ask_agent(p: Prompter, a: Answers, args: argparse.Namespace) -> None:
    from chatgate.app.cli import init_checks  # urllib: only for init, not for every chatgate command

    p.say("\n1. The agent: who answers the messages")
    a.agent = _pick(
        p,
        args.agent,
        "Agent: echo (offline test agent) or openai (any OpenAI-compatible API)",
        a.agent,
        ("echo", "openai"),
    )
    if a.agent != "openai":
        return
    a.openai_base_url = _pick(p, args.openai_base_url, "Base URL of the endpoint", a.openai_base_url)
    a.openai_key_env = _env_name(
        p, args.openai_key_env, "Environment variable holding the API key", a.openai_key_env
    )
    key = os.environ.get(a.openai_key_env)
    if not key:
        p.say(
            f"  {a.openai_key_env} is not set in this shell (not checked now); export it before chatgate run"
        )
    else:
        try:
            models = init_checks.openai_models(a.openai_base_url, key)
        except init_checks.CheckFailed as exc:
            p.say(f"  The endpoint check failed: {exc}")
            if not p.interactive or not p.confirm("Keep these settings anyway?", False):
                raise Aborted(f"the agent endpoint did not pass its check: {exc}") from None
        else:
            shown = ", ".join(models[:20]) + (f" (and {len(models) - 20} more)" if len(models) > 20 else "")
            p.say(f"  The endpoint answers; models: {shown or '(none listed)'}")
            if models and a.openai_model not in models and args.openai_model is None:
                a.openai_model = models[0]
    a.openai_model = _pick(p, args.openai_model, "Model", a.openai_model)


def ask_platforms(p: Prompter, a: Answers, args: argparse.Namespace) -> None:
    p.say("\n2. Platforms: where people chat with it")
    flag = ",".join(args.platform) if args.platform else None
    while True:
        chosen = _list(
            _pick(
                p,
                flag,
                "Platforms, comma-separated (web, telegram, relay, discord, slack)",
                ",".join(a.platforms),
            )
        )
        unknown = [name for name in chosen if name not in NATIVE + VIA_RELAY]
        if not unknown and chosen:
            break
        if flag is not None or not p.interactive:
            names = ", ".join(NATIVE + VIA_RELAY)
            raise Aborted(f"unknown platform(s) {unknown or '(none chosen)'}; choose from {names}")
        p.say(f"  Choose at least one of: {', '.join(NATIVE + VIA_RELAY)}")
    relayed = [name for name in chosen if name in VIA_RELAY]
    for name in relayed:
        p.say(
            f"  {name.capitalize()} is not native in chatgate yet: it is reached through a relay connector"
            " (docs/platforms/relay.md). Adding the relay for it."
        )
    a.platforms = [name for name in NATIVE if name in chosen or (name == "relay" and relayed)]
    if relayed:
        a.relay_fronted = relayed
    if "web" in a.platforms:
        p.say("  web: the built-in chat, at http://127.0.0.1:8765/ once the gateway runs")
    if "telegram" in a.platforms:
        ask_telegram(p, a, args)
    if "relay" in a.platforms:
        ask_relay(p, a, args)


def ask_telegram(p: Prompter, a: Answers, args: argparse.Namespace) -> None:
    from chatgate.app.cli import init_checks

    p.say("  telegram: talk to @BotFather in Telegram, send /newbot, and keep the token it gives you")
    a.telegram_token_env = _env_name(
        p, args.telegram_token_env, "  Environment variable holding the bot token", a.telegram_token_env
    )
    if args.telegram_api_base is not None:
        a.telegram_api_base = args.telegram_api_base
    token = os.environ.get(a.telegram_token_env)
    if not token:
        p.say(
            f"  {a.telegram_token_env} is not set in this shell: export {a.telegram_token_env}=<token> and"
            " run `chatgate init` again to check it (written unchecked)"
        )
        return
    try:
        bot = init_checks.telegram_bot(a.telegram_api_base, token)
    except init_checks.CheckFailed as exc:
        p.say(f"  Telegram check failed: {exc}")
        if not p.interactive or not p.confirm("  Keep this token variable anyway?", False):
            raise Aborted(f"the Telegram token did not pass its check: {exc}") from None
        return
    p.say(f"  Telegram: the token belongs to @{bot.username}. Chat with it: {bot.link}")


def ask_relay(p: Prompter, a: Answers, args: argparse.Namespace) -> None:
    p.say("  relay: a relay connector fronts Discord or Slack for this gateway (docs/platforms/relay.md)")
    a.relay_url = _pick(p, args.relay_url, "  Connector URL (wss://... or http://...)", a.relay_url)
    a.relay_gateway_id = _pick(
        p, args.relay_gateway_id, "  Gateway id the connector enrolled", a.relay_gateway_id
    )
    a.relay_secret_env = _env_name(
        p, args.relay_secret_env, "  Environment variable holding the relay secret", a.relay_secret_env
    )
    for name in a.relay_fronted:
        flag = args.relay_bot_id if len(a.relay_fronted) == 1 else None
        a.relay_bot_ids[name] = _pick(
            p, flag, f"  {name} bot id (as the connector knows it)", a.relay_bot_ids.get(name, "")
        )
    if not os.environ.get(a.relay_secret_env):
        p.say(f"  {a.relay_secret_env} is not set in this shell; export it before `chatgate run`")


def ask_access(p: Prompter, a: Answers, args: argparse.Namespace) -> None:
    others = [name for name in a.platforms if name != "web"]
    if not others:
        return
    p.say(
        "\n3. Who may talk (on " + ", ".join(others) + "; the web chat on loopback is open to this machine)"
    )
    a.allow = _pick(
        p,
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
    a.allow_users = _list(_pick(p, users, question, ",".join(a.allow_users)))
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


def secret_names(a: Answers) -> list[str]:
    names = [a.openai_key_env] if a.agent == "openai" else []
    names += [a.telegram_token_env] if "telegram" in a.platforms else []
    return names + ([a.relay_secret_env] if "relay" in a.platforms else [])


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


def _offer_service(p: Prompter, args: argparse.Namespace, path: Path) -> None:
    from chatgate.app.cli import service

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
    state_dir = Path(args.state_dir).expanduser().resolve() if args.state_dir else None
    service_args = argparse.Namespace(config=str(path), print_only=False)
    from chatgate.app.cli.common import resolve_state_dir

    service.cmd_install(service_args, state_dir or resolve_state_dir(None, load_config(path)))


def run_wizard(args: argparse.Namespace) -> int:
    path = Path(args.write).expanduser().resolve()
    p = Prompter(interactive=not args.yes)
    existing = _existing(path)
    a = answers_from(existing)
    p.say(f"chatgate init: writing {path}" + (" (current values are the defaults)" if existing else ""))
    ask_agent(p, a, args)
    ask_platforms(p, a, args)
    ask_access(p, a, args)
    text = render(merged(existing, a), str(path))
    try:
        config = validated(text, path, secret_names(a))
    except ConfigError as exc:
        raise Aborted(f"the config would not load, so it was not written:\n{exc}") from None
    if (needs := check_extras(config)) is not None:
        p.say(f"  Before chatgate run: {needs.split(': ', 1)[1]}")
    p.say(
        f"\nagent {config.agent.kind}; platforms {', '.join(a.platforms)}"
        + (f"; access {a.allow}" if set(a.platforms) - {"web"} else "")
    )
    if p.interactive and not p.confirm(f"Write {path}?", True):
        raise Aborted("not written")
    path.write_text(text, encoding="utf-8")
    p.say(f"Wrote {path}.")
    _offer_service(p, args, path)
    run = f"chatgate run --config {path}"
    p.say(f"\nStart it:  {run}")
    if "web" in a.platforms:
        p.say(f"Then open http://{config.http.host}:{config.http.port}/ and say hello.")
    if a.allow == "pairing" and set(a.platforms) - {"web"}:
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
    init.add_argument(
        "--platform", action="append", help="web, telegram, relay, discord or slack (repeat for more)"
    )
    init.add_argument("--telegram-token-env", help="the environment variable holding the bot token")
    init.add_argument("--telegram-api-base", help="the Bot API address (default https://api.telegram.org)")
    init.add_argument("--relay-url", help="the relay connector's URL")
    init.add_argument("--relay-gateway-id", help="the gateway id the connector enrolled")
    init.add_argument("--relay-secret-env", help="the environment variable holding the relay secret")
    init.add_argument("--relay-bot-id", help="the fronted platform's bot id")
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
