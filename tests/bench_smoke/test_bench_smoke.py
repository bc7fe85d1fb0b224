"""The benchmarks under bench/ run: a --quick run exits 0 and prints one JSON object.

No performance thresholds: these only prove the scripts work end to end (real SQLite
files, a real gateway subprocess, real WebSocket clients) and report what they claim.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from chatgate.app.config import GatewayConfig
from chatgate.app.gateway import Gateway
from chatgate.platforms.kit.conform import conform

# The benchmarks each load both cores for a few seconds: one worker runs them in turn.
pytestmark = pytest.mark.xdist_group("bench")

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def run_bench(script: str, *args: str, timeout: float = 100) -> dict[str, Any]:
    """The script's ``--quick`` JSON. ``timeout`` stays below the test's own (pytest-timeout's,
    120 s unless the test says more), so a slow run fails here, with what it printed so far."""
    try:
        proc = subprocess.run(
            [sys.executable, str(BENCH / script), "--quick", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"{script} did not finish in {timeout} s; its stderr so far:\n{exc.stderr}"
        ) from exc
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    result = json.loads(proc.stdout)  # the whole stdout is exactly one JSON object
    assert isinstance(result, dict)
    return result


def test_admission_bench_quick_run_reports_both_commit_modes_as_json(tmp_path: Path) -> None:
    result = run_bench("admission.py", "--dir", str(tmp_path))
    assert result["synchronous"] == "FULL"
    assert result["correct"] is True
    for key in ("events", "concurrency", "python", "sqlite", "ratio"):
        assert key in result
    for mode in ("group_commit", "one_commit_per_event"):
        figures = result[mode]
        for key in ("admissions_per_s", "runs", "median_batch", "p50_ms", "p99_ms"):
            assert key in figures, (mode, key)
        assert figures["admissions_per_s"] > 0
        assert figures["runs"] and all(run["correct"] for run in figures["runs"])
        assert all(run["rows_on_disk"] == figures["events"] for run in figures["runs"])
    assert result["one_commit_per_event"]["median_batch"] == 1
    assert result["ratio"] > 0
    assert list(tmp_path.iterdir()) == []  # the temp databases were removed


def _check_e2e(result: dict[str, Any]) -> None:
    assert result["correct"] is True, result
    for key in ("messages_per_s", "latency_ms", "loop_lag_p99_s", "loop_lag_max_s", "phases", "client_procs"):
        assert key in result
    assert result["messages_per_s"] > 0
    assert {"p50", "p99"} <= set(result["latency_ms"])
    assert result["loop_lag_p99_s"] is not None
    phase = result["phases"][0]
    assert phase["finals"] == phase["messages"] == result["chats"] * result["messages_per_chat"]
    assert phase["problems"] == []
    assert result["shutdown"]["exited_on_sigterm"] is True
    assert result["shutdown"]["exit_code"] == 0
    assert result["database"]["ok"] is True
    assert result["database"]["unconfirmed"] == 0


def test_e2e_bench_quick_run_gets_every_final_once_in_order_and_stops_the_gateway(tmp_path: Path) -> None:
    result = run_bench("e2e.py", "--dir", str(tmp_path))
    _check_e2e(result)
    assert result["client_procs"] == 1


def test_e2e_bench_quick_run_with_two_client_processes_merges_their_figures(tmp_path: Path) -> None:
    result = run_bench("e2e.py", "--dir", str(tmp_path), "--client-procs", "2")
    _check_e2e(result)
    assert result["client_procs"] == 2


def _check_intake_lane(result: dict[str, Any], figures: dict[str, Any], lane: str) -> None:
    assert figures["correct"] is True, (lane, figures)
    for key in ("admissions_per_s", "wall_s", "mean_batch", "writer_busy", "gateway_cpu", "runs"):
        assert key in figures, (lane, key)
    assert figures["admissions_per_s"] > 0
    assert len(figures["runs"]) == result["runs"]
    for run in figures["runs"]:
        assert run["correct"] is True
        db = run["database"]
        assert db["inbox_rows"] == db["distinct_deliveries"] == run["messages"] == result["messages"]
        assert db["missing_rows"] == db["unexpected_rows"] == db["chats_out_of_order"] == 0
        assert run["rejected_rows"] == 0
        assert run["shutdown"]["exited_on_sigterm"] is True
        assert run["shutdown"]["exit_code"] == 0
        assert run["writer"]["commits"] > 0
        if lane == "relay":
            assert run["all_acked"] is run["acked_once"] is run["injected_in_order"] is True
            assert run["acked"] == run["messages"] and run["unacked_at_end"] == 0
            assert {"p50", "p99"} <= set(run["inject_to_ack_ms"]) and {"p50", "p99"} <= set(
                run["sent_to_ack_ms"]
            )
        else:
            assert run["confirmed"] is run["offsets_rising"] is True
            assert run["get_updates_calls"] >= 2  # the batch, then the offset that confirms it


def test_intake_bench_quick_run_floods_both_lanes_and_finds_every_message_once_in_order(
    tmp_path: Path,
) -> None:
    result = run_bench("intake.py", "--dir", str(tmp_path), "--sim-dir", str(tmp_path))
    assert result["correct"] is True
    assert result["lanes"] == ["relay", "telegram"]
    for key in ("messages", "chats", "runs", "max_concurrent_turns", "gateway", "loadavg_before", "python"):
        assert key in result
    for lane in result["lanes"]:
        _check_intake_lane(result, result[lane], lane)
    assert result["gateway"]["chatgate"] == str(ROOT / "src" / "chatgate" / "__init__.py")
    assert result["baseline"] is None and result["ratio"] is None
    assert list(tmp_path.iterdir()) == []  # state dirs and the simulator's buffer were removed


def test_intake_bench_quick_run_against_a_baseline_tree_reports_both_and_their_ratio(tmp_path: Path) -> None:
    src = str(ROOT / "src")  # the same tree twice: what matters is that --baseline-src drives a gateway
    result = run_bench("intake.py", "--dir", str(tmp_path), "--lane", "relay", "--baseline-src", src)
    assert result["correct"] is True
    assert result["lanes"] == ["relay"] and "telegram" not in result
    _check_intake_lane(result, result["relay"], "relay")
    _check_intake_lane(result, result["baseline"]["relay"], "relay")
    assert result["baseline"]["gateway"]["src"] == src
    assert result["ratio"]["relay"] > 0


def test_pacing_bench_quick_run_answers_every_message_and_reports_the_call_log_figures() -> None:
    result = run_bench("pacing.py")
    for name in ("default", "limit_5", "one_chat"):
        scenario = result[name]
        assert scenario["answered"] == result["messages"] and scenario["failed"] == 0, scenario
        assert {"busiest_second", "busiest_10ms", "calls_per_s", "share_429", "max_attempts"} <= set(scenario)
    assert result["limit_5"]["share_429"] > 0, "the double's limit never bit"
    assert result["one_chat"]["share_429"] > 0, "the one chat's 429 never came"
    assert result["one_chat"]["others_vs_default"] is not None


def test_first_contact_bench_quick_run_answers_every_conversation_on_slack_and_discord() -> None:
    result = run_bench("first_contact.py")
    for platform in ("slack", "discord"):
        for subject in ("bare", "gateway"):
            assert result[platform][subject]["answered"] == 5, result[platform]
        saturation = result[platform]["saturation"]
        # The fake stamps calls on this bench's loop: on a busy machine a stall of it stamps calls
        # that arrived apart at once, so the budget is read over a second less its worst stall
        # (the in-process pacing tests read the gateway's own loop lag the same way).
        assert saturation["answered"] == 5, saturation
        assert saturation["busiest_second_beyond_stamp_lag"] <= saturation["rate"], saturation
        assert saturation["busiest_second"] >= saturation["busiest_second_beyond_stamp_lag"], saturation
    assert result["discord"]["saturation"]["violations"] == 0
    assert result["slack"]["gateway_budget_lifted"]["answered"] == 5


def test_platform_cpu_bench_quick_run_answers_every_message_for_both_subjects_on_slack_and_discord() -> None:
    result = run_bench("platform_cpu.py")
    for platform in ("slack", "discord"):
        for subject in ("bare", "gateway"):
            [run] = result[platform][subject]["runs"]
            assert run["answered"] == result["workload"]["messages"] and run["exited_on_sigterm"], run
            assert 0 < run["start_to_connect_s"] < 60, run  # exec to IDENTIFY / hello, within the wait
            assert run["peak_rss_mb"] > 10, run  # an interpreter with its platform library loaded
            # The loop thread's share: no more than the whole, within a clock tick or two.
            assert 0 <= run["main_thread_cpu_ms_per_message"] <= run["cpu_ms_per_message"] + 5, run
            # By thread: the main thread first, then the others largest first, summing to the whole.
            split = run["thread_cpu_ms_per_message"]
            assert split[1:] == sorted(split[1:], reverse=True) and all(v > 0 for v in split[1:]), run
            assert abs(sum(split) - run["cpu_ms_per_message"]) <= 5, run
        assert "ratio" in result[platform]  # None when the bare bot used less than a clock tick
        assert result[platform]["start_ratio"] > 0 and result[platform]["rss_ratio"] > 0, result[platform]


async def test_gateway_disables_nagle_on_accepted_web_sockets(tmp_path: Path) -> None:
    config = conform(GatewayConfig, dict(http={"port": 0}, agent={"echo": {"chunk_delay_ms": 0}}))
    gateway = Gateway(config, tmp_path / "state")
    await gateway.start()
    try:
        async with connect(f"ws://127.0.0.1:{gateway.port}/ws", open_timeout=30) as ws:
            await ws.send(json.dumps({"type": "hello", "chat_id": "nagle", "user_id": "u1"}))
            assert json.loads(await ws.recv())["type"] == "ready"
            assert gateway._server is not None
            connections = gateway._server.server_state.connections
            server_socks = [c.transport.get_extra_info("socket") for c in connections]
            assert server_socks
            assert all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in server_socks)
    finally:
        await gateway.stop()


def test_e2e_bench_quick_comparison_runs_chatgate_a_baseline_and_the_floor_interleaved(
    tmp_path: Path,
) -> None:
    src = str(ROOT / "src")  # the same tree as baseline: what matters is that every target runs
    result = run_bench("e2e.py", "--dir", str(tmp_path), "--floor", "--baseline-src", src)
    assert result["correct"] is True, result
    assert result["mode"] == "compare" and result["baseline_src"] == src
    assert set(result["targets"]) == {"baseline", "chatgate", "floor"}
    for name, target in result["targets"].items():
        assert len(target["runs"]) == result["rounds"]
        assert len(target["phases"]) == len(result["phase_specs"])
        for phase in target["phases"]:
            for key in ("cpu_per_message_ms", "latency_p50_ms", "latency_p99_ms", "messages_per_s", "rss_mb"):
                assert key in phase, (name, key)
            assert phase["latency_p50_ms"] > 0
        for run in target["runs"]:
            assert run["correct"] is True and run["shutdown"]["exit_code"] == 0
            assert (run["database"] is None) is (name == "floor")  # the floor stores nothing
    for pair in ("chatgate_to_floor", "baseline_to_floor", "chatgate_to_baseline"):
        assert len(result["ratio"][pair]) == len(result["phase_specs"])
        assert set(result["ratio"][pair][0]) == {"cpu_per_message_ms", "latency_p50_ms", "latency_p99_ms"}
    assert list(tmp_path.iterdir()) == []


def test_intake_bench_quick_relay_floor_run_reports_cpu_per_message_and_the_ratio(tmp_path: Path) -> None:
    result = run_bench(
        "intake.py", "--dir", str(tmp_path), "--sim-dir", str(tmp_path), "--lane", "relay", "--floor"
    )
    assert result["correct"] is True
    _check_intake_lane(result, result["relay"], "relay")
    floor = result["floor"]
    assert floor["correct"] is True and len(floor["runs"]) == result["runs"]
    for figures in (result["relay"], floor):
        for key in ("cpu_per_message_ms", "inject_to_reply_p50_ms", "inject_to_reply_p99_ms", "rss_mb"):
            assert key in figures, key
        assert all(run["all_replied"] and run["acked_once"] for run in figures["runs"])
    assert set(result["ratio_to_floor"]["main"]) == {
        "cpu_per_message_ms",
        "inject_to_reply_p50_ms",
        "inject_to_reply_p99_ms",
    }
    assert list(tmp_path.iterdir()) == []


def test_telegram_bench_quick_run_answers_every_message_for_every_subject_and_reports_ratios(
    tmp_path: Path,
) -> None:
    result = run_bench("telegram.py", "--dir", str(tmp_path))
    assert result["correct"] is True, result
    assert result["workload"]["agent"] == "openai"
    for subject in ("gateway", "bare", "durable", "durable_acked"):
        figures = result[subject]
        for key in ("first_reply_p50_ms", "first_reply_p99_ms", "cpu_ms_per_message", "peak_rss_mb"):
            assert figures[key] > 0, (subject, key)
        assert figures["start_to_first_poll_s"] > 0 and figures["start_cpu_s"] > 0
        (run,) = figures["runs"]
        assert run["answered"] == result["workload"]["messages"] and run["extra_sends"] == 0
        assert run["shutdown"]["exit_code"] == 0
    assert result["gateway"]["runs"][0]["log"]["warnings_or_errors"] == 0
    # The loop thread's share of the CPU: no more than the whole, within two 10-ms clock ticks
    # over the quick run's 40 messages (the two counters are read a moment apart).
    gateway_cpu = result["gateway"]["cpu_ms_per_message"]
    assert 0 < result["gateway"]["main_thread_cpu_ms_per_message"] <= gateway_cpu + 0.5
    # By thread, summing to the whole within the same ticks: the loop, then the SQLite writer.
    split = result["gateway"]["runs"][0]["thread_cpu_ms_per_message"]
    assert len(split) >= 2 and split[1] > 0 and abs(sum(split) - gateway_cpu) <= 0.5, split
    # One round: its paired ratio is the ratio of the medians.
    paired = result["paired_to_durable"]["cpu_ms_per_message"]
    to_durable = result["ratios_to_durable"]["cpu_ms_per_message"]
    assert paired["min"] == paired["median"] == paired["max"] == to_durable, paired
    for key in ("cpu_ms_per_message", "first_reply_p50_ms", "first_reply_p99_ms", "peak_rss_mb"):
        for ratios in (
            "ratios",
            "ratios_to_durable",
            "ratios_to_durable_acked",
            "floor_cost_of_acking_first",
        ):
            assert result[ratios][key] > 0, (ratios, key)
    assert set(result["targets"]) == {
        "cpu_per_message_le_1_5x",
        "p50_le_2x",
        "gateway_rss_le_90_mb",
        "gateway_first_poll_le_0_5_s",
    }
    assert set(result["targets_issue_33"]) == {
        "gateway_rss_le_60_mb",
        "cpu_per_message_le_1_5x_durable",
        "p50_le_1_3x_durable",
    }
    assert list(tmp_path.iterdir()) == []  # each run's state dir was removed


def test_telegram_render_bench_reports_each_text_against_html_escape() -> None:
    result = run_bench("telegram_render.py")
    texts = result["texts"]
    assert set(texts) == {"one_line_reply", "answer_1500_chars", "answer_4000_chars", "code_spans_4000_chars"}
    for name, figures in texts.items():
        assert figures["render_us"] > 0 and figures["floor_escape_us"] > 0, name
        assert figures["ratio"] == round(figures["render_us"] / figures["floor_escape_us"], 1), name
    assert texts["answer_4000_chars"]["chars"] > texts["answer_1500_chars"]["chars"] > 1500


def test_slack_ack_bench_quick_run_acknowledges_and_answers_every_event(tmp_path: Path) -> None:
    result = run_bench("slack_ack.py", "--dir", str(tmp_path))
    assert result["events"] == 100 and result["channels"] == 10
    assert result["answered_once"] is True
    for key in ("ack_p50_ms", "ack_p99_ms", "ack_max_ms", "acks_at_or_over_3s", "redeliveries"):
        assert key in result
    assert result["ack_p50_ms"] <= result["ack_p99_ms"] <= result["ack_max_ms"]
    assert list(tmp_path.iterdir()) == []


def test_slack_previews_bench_quick_run_seals_every_reply_and_reports_the_previews(tmp_path: Path) -> None:
    result = run_bench("slack_previews.py", "--dir", str(tmp_path))
    assert result["replies"] == 5 and result["correct"] is True
    for key in ("without_preview", "previews_per_reply", "min_channel_gap_s", "busiest_second", "errors_429"):
        assert key in result
    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(
    330
)  # eight runs of real gateways, and four databases made and dropped on a shared server
def test_fleet_bench_quick_run_reports_sqlite_and_each_fleet_size_for_both_agents() -> None:
    from support.postgres import require_postgres

    require_postgres()
    result = run_bench("fleet.py", timeout=300)
    assert result["correct"] is True
    for agent in ("instant", "slow"):
        figures = result[agent]
        assert figures["sqlite"]["processes"] == 1 and figures["sqlite"]["messages_per_s"] > 0
        assert [r["processes"] for r in figures["postgres"]] == [1, 2]
        for run in (figures["sqlite"], *figures["postgres"]):
            assert run["correct"] and run["messages"] == 12
            assert set(run["latency_ms"]) == {"p50", "p99", "max"}
        assert "db_limit" in figures


def test_trace_bench_counts_the_files_one_web_message_runs() -> None:
    result = run_bench("trace_message.py")
    assert result["files"] == len(result["file_list"]) > 10
    assert "engine/admission.py" in result["file_list"] and "store/sqlite/writer.py" in result["file_list"]
    assert result["functions"] == len(result["function_list"])


def test_media_bench_quick_run_takes_an_image_to_the_model_and_many_uploads_at_once() -> None:
    result = run_bench("media.py")
    image, uploads = result["image"], result["uploads"]
    assert image["bytes"] > 0 and image["ratio"] > 0
    assert image["media_path_s"] > 0 and image["bare_copy_s"] > 0
    assert uploads["users"] == 3 and uploads["seconds"] > 0 and "peak_rss_growth_mb" in uploads


def test_uploads_http_bench_quick_run_uploads_through_a_gateway_process() -> None:
    result = run_bench("uploads_http.py")  # each upload is checked (200, its size) by the script
    assert (result["users"], result["file_mb"]) == (3, 1.0)
    assert result["seconds"] > 0 and result["rss_before_mb"] > 0 and "peak_rss_growth_mb" in result


def test_image_http_bench_quick_run_takes_an_image_to_the_model_through_a_gateway_process() -> None:
    result = run_bench("image_http.py")  # the model server checks the image's sha256 itself
    assert result["bytes"] > 0 and result["runs"] == 1
    assert result["gateway_s"] > 0 and result["bare_s"] > 0 and result["ratio"] > 0


def test_blob_stream_bench_quick_run_reads_a_blob_whole_and_streamed_on_both_backends() -> None:
    result = run_bench("blob_stream.py")
    assert result["mb"] == 2.0
    for key in ("sqlite_whole", "sqlite_stream", "postgres_whole", "postgres_stream"):
        assert result[key]["seconds"] > 0 and "peak_rss_growth_mb" in result[key]


def test_voice_bench_quick_run_decodes_and_recognises_a_spoken_note() -> None:
    result = run_bench("voice.py")
    assert result["note_seconds"] > 0 and result["recognise_cpu_s"] > 0
    assert result["words"] == 10 and 0 <= result["words_right"] <= 10
    assert "rss_growth_mb" in result and "cpu_per_audio_second" in result
