"""What ``chatgate init`` asks the agent's endpoint before writing a config (the platforms'
checks are their plugins'): an OpenAI-compatible ``GET /models``."""

from __future__ import annotations

from chatgate.platforms.kit.init import CheckFailed, get_json


def openai_models(base_url: str, api_key: str) -> list[str]:
    """The model ids an OpenAI-compatible endpoint lists (``GET {base_url}/models``)."""
    url = base_url.rstrip("/") + "/models"
    body = get_json(url, {"Authorization": f"Bearer {api_key}"}, f"the endpoint {url}", secret=api_key)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise CheckFailed(f"{url} answered, but not with a model list; is it OpenAI-compatible?")
    return sorted(str(m["id"]) for m in data if isinstance(m, dict) and "id" in m)
