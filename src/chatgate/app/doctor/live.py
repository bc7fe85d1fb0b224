"""The checks that talk to the real services: each platform's credential (the same calls
``init`` makes, through the plugins) and the model endpoint (a real one-token completion)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from chatgate.app import registry
from chatgate.app.config import GatewayConfig
from chatgate.app.config.model import OpenAIConfig
from chatgate.app.doctor.finding import Finding
from chatgate.platforms.kit.init import CheckFailed, get_json


def platforms(config: GatewayConfig, environ: Mapping[str, str], running: bool) -> Iterator[Finding]:
    """One finding per enabled platform with a credential to prove (``running``: a gateway runs
    on this state dir, so a check that would take its connection over is not run)."""
    for name, section in config.platforms.enabled():
        plugin = registry.plugin(name)
        check = f"platform {name}"
        unset = [s.env or s.key for s in plugin.secrets(section) if not s.env or not environ.get(s.env)]
        if unset:
            yield Finding.skip(check, f"not checked: {', '.join(unset)} is not set (see secrets)")
            continue
        if running and plugin.live_check_displaces:
            yield Finding.skip(check, "not checked: the gateway running here holds its connection")
            continue
        try:
            found = plugin.live_check(section, environ)
        except CheckFailed as exc:
            yield Finding.fail(
                check,
                str(exc),
                f"check {plugin.title}'s credential and that the service is reachable ({plugin.doc})",
            )
            continue
        if found is not None:
            yield Finding.ok(check, found)


def models(config: GatewayConfig, environ: Mapping[str, str]) -> Iterator[Finding]:
    """A one-token completion from every model endpoint the config names."""
    if config.agent.kind != "openai":
        yield Finding.skip("model", f"the agent is {config.agent.kind!r}: no model endpoint")
        return
    named = {"default": config.agent.openai, **config.agent.profiles}
    for name, profile in named.items():
        check = "model" if name == "default" else f"model {name}"
        key = environ.get(profile.api_key_env)
        if not key:
            yield Finding.skip(check, f"not checked: {profile.api_key_env} is not set (see secrets)")
            continue
        try:
            yield Finding.ok(check, complete_one_token(profile, key))
        except CheckFailed as exc:
            yield Finding.fail(
                check, str(exc), "check base_url, model and the API key (chatgate init asks them again)"
            )


def complete_one_token(profile: OpenAIConfig, key: str) -> str:
    """``POST /chat/completions`` with ``max_tokens: 1``: the endpoint, the key and the model at once."""
    url = profile.base_url.rstrip("/") + "/chat/completions"
    body = {"model": profile.model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
    answer = get_json(url, {"Authorization": f"Bearer {key}"}, f"the endpoint {url}", secret=key, body=body)
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices:
        raise CheckFailed(f"{url} answered, but not with a completion; is it OpenAI-compatible?")
    return f"{profile.model} at {profile.base_url} completes"
