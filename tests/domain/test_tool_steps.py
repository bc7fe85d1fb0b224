"""A reply's tool steps as the turn records them in its final's target and the web chat's
history reads them back: bounded, and a damaged record reads as no steps, never an error."""

from __future__ import annotations

import json

from chatgate.agents.base import ToolCall, ToolResult
from chatgate.domain.tool_steps import MAX_STEPS, STEPS_KEY, ToolStep, as_json, steps_of
from chatgate.engine.tool_progress import ToolSteps


def test_the_steps_of_a_turn_round_trip_with_their_outcomes() -> None:
    steps = ToolSteps()
    steps.started(ToolCall("a", "shell", {"command": "make test\nmore"}))
    steps.started(ToolCall("b", "shell", {"command": "rm -rf ./x"}))
    steps.finished(ToolResult("b", "no", status="denied"))
    steps.finished(ToolResult("a", "exit code 0"))
    steps.started(ToolCall("c", "read_file", {}))  # the turn ended before its result
    record = steps.dumps()
    assert record is not None
    read = steps_of({STEPS_KEY: record})
    assert read == (
        ToolStep("shell", "make test", "done"),
        ToolStep("shell", "rm -rf ./x", "declined"),
        ToolStep("read_file", "", None),
    )
    assert as_json(read)[2] == {"name": "read_file", "detail": ""}


def test_no_tool_call_records_nothing() -> None:
    assert ToolSteps().dumps() is None
    assert steps_of({}) == ()


def test_a_damaged_or_hostile_record_reads_as_no_steps_or_bounded_ones() -> None:
    for raw in ("{", "3", '{"name": "x"}', json.dumps([1, None, {"detail": "no name"}]), 7):
        assert steps_of({STEPS_KEY: raw}) == (), raw
    many = [{"name": "n" * 1000, "detail": "d" * 1000, "outcome": "<b>"}] * (MAX_STEPS + 10)
    read = steps_of({STEPS_KEY: json.dumps(many)})
    assert len(read) == MAX_STEPS
    assert len(read[0].name) == 200 and len(read[0].detail) == 200 and read[0].outcome is None


def test_a_turn_with_many_calls_keeps_the_first_ones() -> None:
    steps = ToolSteps()
    steps.started(ToolCall("long", "n" * 5000, {}))  # a model's tool name is bounded too
    assert len(steps.steps[0].name) == 200
    steps = ToolSteps()
    for n in range(MAX_STEPS + 5):
        steps.started(ToolCall(str(n), "shell", {"command": f"echo {n}"}))
        steps.finished(ToolResult(str(n), "ok"))
    read = steps_of({STEPS_KEY: steps.dumps()})
    assert len(read) == MAX_STEPS and read[-1] == ToolStep("shell", f"echo {MAX_STEPS - 1}", "done")
