"""The pure rules of schedules (durations, cron, the next firing) and of webhooks (secrets, template)."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatgate.domain.schedules import (
    Schedule,
    ScheduleError,
    ScheduleTarget,
    cron_next,
    firing_delivery_id,
    next_fire_after,
    parse_duration,
)
from chatgate.domain.webhooks import (
    MAX_FIELDS,
    bearer_valid,
    flatten,
    hmac_valid,
    render_prompt,
    signed_message,
    timestamp_of,
)

T0 = 1_800_000_000.0


def every(seconds: float) -> Schedule:
    return Schedule("s", "every", str(seconds), "x", ScheduleTarget(None, "k"), "config", T0, 0.0)


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("10m", 600), ("1h30m", 5400), ("2D", 172800)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10", "5x", "0s", "400d", "10m and more"])
def test_bad_durations_say_how_to_write_one(text: str) -> None:
    with pytest.raises(ScheduleError, match=r"duration|out of range"):
        parse_duration(text)


def test_cron_next_is_strictly_later_and_in_utc() -> None:
    monday_9 = 1_800_003_600.0 - (1_800_003_600 % 3600)  # some whole hour
    assert cron_next("0 * * * *", monday_9) == monday_9 + 3600
    assert cron_next("*/2 * * * * *", T0) == T0 + 2
    with pytest.raises(ScheduleError, match="not a cron expression"):
        cron_next("61 * * * *", T0)


def test_the_firing_delivery_id_names_the_schedule_and_the_whole_second() -> None:
    assert firing_delivery_id("config:tick", 1_000.4) == "schedule:config:tick:1970-01-01T00:16:40Z"


@given(st.floats(1, 86400), st.floats(0, 10 * 86400))
def test_the_next_firing_is_one_slot_after_now_on_the_grid(interval: float, gap: float) -> None:
    interval = float(int(interval))
    fired_at = T0
    nxt = next_fire_after(every(interval), fired_at, fired_at + gap)
    assert nxt is not None
    assert nxt > fired_at + gap and nxt > fired_at
    assert nxt - interval <= fired_at + gap, "no slot after now is skipped"
    steps = (nxt - fired_at) / interval
    assert abs(steps - round(steps)) < 1e-6, "the phase is kept"


def test_a_once_schedule_has_no_next_firing() -> None:
    once = Schedule("s", "once", str(T0), "x", ScheduleTarget(None, "k"), "chat", T0, 0.0)
    assert next_fire_after(once, T0, T0 + 5) is None


def test_the_signed_message_and_timestamps() -> None:
    assert signed_message("1700000000", "d-1", b"{}") == b"1700000000.d-1.{}"
    assert timestamp_of(" 1700000000 ") == 1700000000
    for bad in (None, "", "-5", "1.5", "1e9", "yesterday", "٣", "9" * 13):
        assert timestamp_of(bad) is None, bad


def test_hmac_and_bearer_checks() -> None:
    body = b'{"a":1}'
    good = "sha256=" + hmac.new(b"k", body, hashlib.sha256).hexdigest()
    assert hmac_valid(b"k", body, good, "sha256=")
    assert hmac_valid(b"k", body, good.upper().replace("SHA256=", "sha256="), "sha256=")
    assert not hmac_valid(b"k", body + b" ", good, "sha256=")
    assert not hmac_valid(b"other", body, good, "sha256=")
    assert not hmac_valid(b"k", body, None, "sha256=")
    assert not hmac_valid(b"k", body, good.removeprefix("sha256="), "sha256=")
    assert bearer_valid(b"tok", "Bearer tok") and bearer_valid(b"tok", "bearer  tok")
    assert not bearer_valid(b"tok", "Bearer tok2") and not bearer_valid(b"tok", "Basic tok")
    assert not bearer_valid(b"tok", None)


def test_the_template_fills_fields_and_evaluates_nothing() -> None:
    body = {"a": {"b": "x", "n": 3, "list": [1, {"c": True}]}}
    text = render_prompt(
        "$route ${a.b} ${a.n} ${a.list.1.c} ${a.list} [${missing}] ${a.__class__} $$", "r", body
    )
    assert text == 'r x 3 true [1, {"c": true}] []  $'
    assert render_prompt("$body", "r", [1, "é"]) == '[1, "é"]'


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_any_json_body_renders(body: object) -> None:
    render_prompt("$body ${0} ${a.b}", "r", body)
    assert len(flatten(body)) <= MAX_FIELDS + 1
