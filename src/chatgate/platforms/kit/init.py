"""What ``chatgate init`` gives a plugin to ask its questions with, and to check a credential live.

A wrong answer is asked again with the reason (nothing typed so far is lost); with
``--yes`` every question takes its flag or default silently, and a wrong one stops the
wizard with the reason. The live checks are plain blocking HTTP (the wizard has no event
loop); a secret is sent only to the service it is for and never appears in a message.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec

from chatgate.domain.errors import ChatgateError
from chatgate.platforms.kit.section import env_var_name

TIMEOUT_SECONDS = 10.0
T = TypeVar("T")


class Aborted(ChatgateError):
    """The user stopped the wizard (Ctrl+D, or declined to write), or a --yes run cannot go on."""


class CheckFailed(ChatgateError):
    """A live check did not pass; the message says why and what to do."""


class InitAnswers(msgspec.Struct):
    """What a plugin's questions produce."""

    section: dict[str, Any]
    """Keys written under ``platforms.<name>`` (over the file's current ones)."""
    secrets: list[str] = msgspec.field(default_factory=list)
    """The environment variables the section names (placeholders while the result is validated)."""
    notes: list[str] = msgspec.field(default_factory=list)
    """Lines shown after the file is written ("Chat with it: https://t.me/...")."""


class Prompter:
    """Questions on the terminal; with ``--yes`` every question takes its default silently."""

    def __init__(
        self, interactive: bool, environ: Mapping[str, str], secrets_file: str = "chatgate.env"
    ) -> None:
        self.interactive = interactive
        self.environ = environ
        """Where the secrets the answers name are looked up for the live checks."""
        self.secrets_file = secrets_file
        """Where pasted secrets are saved (``<state dir>/chatgate.env``), for the messages."""
        self.pasted: dict[str, str] = {}
        """Secrets pasted during this run, by variable: saved to the secrets file with the config."""

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

    def until_valid(self, flag: str | None, question: str, default: str, parse: Callable[[str], T]) -> T:
        """Ask until ``parse`` accepts the answer (a ``ValueError`` is its reason, said and asked
        again); a flag or a ``--yes`` run that does not parse stops with the reason."""
        while True:
            value = flag if flag is not None else self.ask(question, default)
            try:
                return parse(value)
            except ValueError as exc:
                if flag is not None or not self.interactive:
                    # never the value in the message: a pasted secret would be shown
                    raise Aborted(f"{question.strip()}: {exc}") from None
                self.say(f"  {exc}")

    def pick(self, flag: str | None, question: str, default: str, choices: tuple[str, ...] = ()) -> str:
        def one_of(value: str) -> str:
            if choices and value.lower() not in choices:
                raise ValueError(f"{value!r} is not one of {', '.join(choices)}; please answer one of them")
            return value.lower() if choices else value

        return self.until_valid(flag, question, default, one_of)

    def env_name(self, flag: str | None, question: str, default: str) -> str:
        """The name of the variable holding a secret. A pasted secret is never shown: it is
        offered a place in the secrets file under the question's own variable (``default``)."""
        pasted: list[str] = []

        def name(value: str) -> str:
            try:
                checked = env_var_name(value)
            except ValueError:
                if not value.strip():
                    raise
                if flag is not None or not self.interactive:
                    raise ValueError(
                        "this must be the name of an environment variable, and what is here looks like"
                        f" the secret itself (not shown); put it in {self.secrets_file} as {default}=..."
                        f" and give the name {default}"
                    ) from None
                pasted.append(value.strip())
                return default
            if not checked:
                raise ValueError("a variable name is needed")
            return checked

        while True:
            chosen = self.until_valid(flag, question, default, name)
            if not pasted:
                return chosen
            secret = pasted.pop()
            self.say("  That is not a variable name; it looks like the secret itself (not shown).")
            if self.confirm(f"  Save it as {default} in {self.secrets_file}?", True):
                self.pasted[default] = secret
                return default
            self.say(f"  Then give the name of the variable that holds it (like {default}).")

    def secret(self, env: str, what: str) -> str | None:
        """The value of ``env`` for a live check: from the environment (or the secrets file,
        loaded already), else pasted now without echo and saved with the config; None: skipped."""
        if self.pasted.get(env):
            return self.pasted[env]
        if self.environ.get(env):
            return self.environ[env]
        if not self.interactive:
            self.say(f"  {env} is not set: put {env}=<{what}> in {self.secrets_file} (not checked now)")
            return None
        import getpass  # the hidden prompt: only when a secret is asked for

        try:
            value = getpass.getpass(
                f"  Paste {what} (hidden; saved as {env} in {self.secrets_file}), or Enter to skip: "
            ).strip()
        except EOFError:
            raise Aborted("no answer (end of input); nothing was written") from None
        if not value:
            self.say(f"  Skipped: put {env}=<{what}> in {self.secrets_file} before chatgate run")
            return None
        self.pasted[env] = value
        return value

    def checked_secret(
        self, env: str, what: str, label: str, check: Callable[[str], str]
    ) -> tuple[str | None, str | None]:
        """A secret and what its live check found. A pasted secret that fails its check is asked
        for again with the reason (Enter skips), so nothing typed before is lost; one from the
        environment or the secrets file goes through ``checked`` (keep it anyway, or stop)."""
        while True:
            value = self.secret(env, what)
            if value is None:
                return None, None
            if env not in self.pasted or not self.interactive:
                return value, self.checked(label, functools.partial(check, value))
            try:
                found = check(value)
            except CheckFailed as exc:
                del self.pasted[env]
                self.say(f"  {label} check failed: {exc}. Paste it again (or Enter to skip).")
                continue
            self.say(f"  {label}: {found}")
            return value, found

    def checked(self, what: str, check: Callable[[], str]) -> str | None:
        """Run a live check and say what it found (returned); on a failure say why and ask whether
        to keep the answer anyway (None), or stop."""
        try:
            found = check()
        except CheckFailed as exc:
            self.say(f"  {what} check failed: {exc}")
            if not self.interactive or not self.confirm("  Keep this answer anyway?", False):
                raise Aborted(f"{what}: the answer did not pass its check: {exc}") from None
            return None
        self.say(f"  {what}: {found}")
        return found


def split_list(text: str) -> list[str]:
    """``a, b c`` -> ``["a", "b", "c"]``."""
    return [item.strip() for item in text.replace(" ", ",").split(",") if item.strip()]


def get_json(
    url: str, headers: dict[str, str], what: str, *, secret: str | None = None, body: Any = None
) -> Any:
    """GET ``url`` (POST ``body`` as JSON when given) and read its JSON; ``CheckFailed`` says
    why not (``secret`` never shown)."""
    import urllib.error  # urllib: only for init, not for every chatgate command
    import urllib.request  # (idem)

    def clean(text: str) -> str:
        return text.replace(secret, "<secret>") if secret else text

    sent = {"User-Agent": "chatgate-init", **headers}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise CheckFailed(f"{what} refused the credential (HTTP {exc.code}); check the value") from None
        raise CheckFailed(clean(f"{what} answered HTTP {exc.code} {exc.reason}")) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CheckFailed(clean(f"could not reach {what}: {reason}")) from None
    except ValueError:
        raise CheckFailed(f"{what} did not answer JSON; is the address right?") from None
