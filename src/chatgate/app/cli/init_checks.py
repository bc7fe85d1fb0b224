"""What ``chatgate init`` asks a platform or an agent endpoint before writing a config.

Plain blocking HTTP (the wizard has no event loop): an OpenAI-compatible ``GET /models``
and Telegram's ``getMe``. Each returns what it found or raises ``CheckFailed`` with a
sentence saying what to do. A secret is sent only to the endpoint it is for and never
appears in a message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

TIMEOUT_SECONDS = 10.0


class CheckFailed(Exception):
    """A check did not pass; the message says why and what to do."""


def _get_json(url: str, headers: dict[str, str], what: str) -> Any:
    request = urllib.request.Request(url, headers={"User-Agent": "chatgate-init", **headers})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise CheckFailed(f"{what} refused the credential (HTTP {exc.code}); check the value") from exc
        raise CheckFailed(f"{what} answered HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CheckFailed(f"could not reach {what}: {reason}") from exc
    except ValueError as exc:
        raise CheckFailed(f"{what} did not answer JSON; is the address right?") from exc


def openai_models(base_url: str, api_key: str) -> list[str]:
    """The model ids an OpenAI-compatible endpoint lists (``GET {base_url}/models``)."""
    url = base_url.rstrip("/") + "/models"
    body = _get_json(url, {"Authorization": f"Bearer {api_key}"}, f"the endpoint {url}")
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise CheckFailed(f"{url} answered, but not with a model list; is it OpenAI-compatible?")
    return sorted(str(m["id"]) for m in data if isinstance(m, dict) and "id" in m)


@dataclass(frozen=True, slots=True)
class TelegramBot:
    id: int
    username: str

    @property
    def link(self) -> str:
        return f"https://t.me/{self.username}"


def telegram_bot(api_base: str, token: str) -> TelegramBot:
    """Who the token belongs to (``getMe``): proves the token before the gateway needs it."""
    url = f"{api_base.rstrip('/')}/bot{token}/getMe"
    try:
        body = _get_json(url, {}, "the Telegram Bot API")
    except CheckFailed as exc:
        raise CheckFailed(str(exc).replace(token, "<token>")) from None
    result = body.get("result") if isinstance(body, dict) and body.get("ok") else None
    if not isinstance(result, dict) or "username" not in result:
        raise CheckFailed("the Telegram Bot API did not accept the token (getMe was not ok)")
    return TelegramBot(int(result.get("id", 0)), str(result["username"]))
