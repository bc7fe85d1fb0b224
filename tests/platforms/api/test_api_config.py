"""``platforms.api``: mistakes caught at start-up naming the key; the env-held key works alone."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from chatgate.app.config import ConfigError, load_config


def _refused(tmp_path: Path, text: str) -> str:
    path = tmp_path / "chatgate.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


def test_env_key_storage_needs_its_variable_set(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CG_API_KEY", raising=False)
    text = "platforms:\n  api:\n    enabled: true\n    key_storage: env\n    key_env: CG_API_KEY\n"
    assert "platforms.api.key_env" in _refused(tmp_path, text)
    assert "platforms.api.key_env" in _refused(
        tmp_path, "platforms:\n  api:\n    enabled: true\n    key_storage: env\n"
    )
    monkeypatch.setenv("CG_API_KEY", "a-key-from-the-environment")
    path = tmp_path / "chatgate.yaml"
    path.write_text(text)
    assert load_config(path).platforms.api.key_storage == "env"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("platforms:\n  api:\n    max_body_bytes: 10\n", "platforms.api.max_body_bytes"),
        ("platforms:\n  api:\n    model: 'has spaces'\n", "platforms.api.model"),
        ("platforms:\n  api:\n    key_storage: file\n", "platforms.api.key_storage"),
        ("platforms:\n  api:\n    wait_second: 5\n", "platforms.api.wait_second"),
    ],
)
def test_a_wrong_api_setting_names_its_key(tmp_path: Path, text: str, key: str) -> None:
    assert key in _refused(tmp_path, text)


async def test_with_env_key_storage_only_that_key_is_accepted(api, monkeypatch) -> None:
    monkeypatch.setenv("CG_API_KEY", "the-one-key")
    world = await api(api={"key_storage": "env", "key_env": "CG_API_KEY"})
    async with world.client(token="the-one-key") as client:
        done = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "hi"}]
        )
    assert done.choices[0].message.content == "echo: hi"
    async with world.client() as client:  # a store key is not accepted in this mode
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()
