"""A feature enabled without its pip extra is refused when the config loads, naming the extra.

The package is made absent at the import system's seam in the child interpreter (a ``None``
in ``sys.modules``: import fails, ``find_spec`` finds nothing), then the real ``chatgate config check``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

BLOCK = """
import sys
sys.modules[{module!r}] = None  # the import system's own "absent": import raises, find_spec is None
from chatgate.app.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def check_without(module: str, config: dict, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "chatgate.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env.update(BOT_TOKEN="123:abc", OPENAI_API_KEY="sk-test")
    return subprocess.run(
        [sys.executable, "-c", BLOCK.format(module=module), "config", "check", str(path)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("module", "config", "expected"),
    [
        (
            "aiohttp",
            {"platforms": {"telegram": {"enabled": True, "token_env": "BOT_TOKEN"}}},
            "platforms.telegram.enabled: Telegram needs `pip install 'chatgate[telegram]'`",
        ),
        (
            "aiohttp",  # the OpenAI-compatible agent's client (agents/model_http.py)
            {"agent": {"kind": "openai"}},
            "agent.kind: the openai agent needs `pip install 'chatgate[openai]'`",
        ),
        (
            "aiohttp",
            {"media": {"voice": {"transcription": "openai"}}},
            "media.voice.transcription: the openai transcription needs `pip install 'chatgate[openai]'`",
        ),
    ],
)
def test_a_feature_without_its_extra_is_a_config_error_naming_the_extra(module, config, expected, tmp_path):
    done = check_without(module, config, tmp_path)
    assert done.returncode == 78, done.stdout + done.stderr
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_the_defaults_need_no_extra(tmp_path):
    done = check_without("aiohttp", {}, tmp_path)
    assert done.returncode == 0, done.stderr
    done = check_without("asyncpg", {}, tmp_path)
    assert done.returncode == 0, done.stderr
