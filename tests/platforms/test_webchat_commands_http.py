"""Control commands over the socket, and the HTTP surfaces (/healthz, /metrics) of a real gateway."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from chatgate.domain.commands import help_text
from support.web_harness import FRAME_TIMEOUT, StartGateway, WebClient, of_type, web_config

Connect = Callable[[int], Awaitable[WebClient]]


async def test_help_and_status_are_answered_as_finals_without_an_agent_turn(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-cmd", "alice")

    help_frames = await client.ask("h1", "/help")
    assert help_frames[0] == {"type": "ack", "id": "h1", "duplicate": False}
    assert of_type(help_frames, "draft") == []
    assert help_frames[-1]["type"] == "final"
    assert help_frames[-1]["text"] == help_text()
    for command in ("/help", "/new", "/stop", "/status"):
        assert command in help_frames[-1]["text"]

    status = (await client.ask("s1", "/status"))[-1]
    assert status["type"] == "final"
    assert status["in_reply_to"] == "s1"
    assert status["text"].startswith("Session agent:main:web:dm:chat-cmd\n")
    assert "echo:" not in status["text"]

    # A command's id is deduplicated like any message.
    await client.message("h1", "/help")
    later = await client.ask("s2", "/status")
    assert of_type(later, "ack")[0] == {"type": "ack", "id": "h1", "duplicate": True}
    assert [f for f in later if f.get("in_reply_to") == "h1"] == []


async def test_new_and_stop_are_answered_as_finals(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-new-stop")
    await client.ask("m1", "some context")

    new = await client.ask("n1", "/new")
    assert new[0] == {"type": "ack", "id": "n1", "duplicate": False}
    assert new[-1]["type"] == "final"
    assert new[-1]["text"].startswith("Started a new conversation.")
    stop = await client.ask("x1", "/stop")
    assert stop[0] == {"type": "ack", "id": "x1", "duplicate": False}
    assert stop[-1]["type"] == "final"
    assert stop[-1]["text"].startswith("Stopped.")
    # The session still answers afterwards.
    assert (await client.ask("m2", "back again"))[-1]["text"] == "echo: back again"


async def test_stop_and_new_replies_state_how_many_messages_were_dropped(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-stop-count")
    stop = (await client.ask("x1", "/stop"))[-1]
    new = (await client.ask("n1", "/new"))[-1]
    assert stop["text"] == "Stopped. Dropped 0 waiting message(s)."
    assert new["text"] == "Started a new conversation. Dropped 0 waiting message(s)."


async def test_stop_cancels_a_running_reply_and_drops_queued_messages(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    # 100 ms per chunk: "long" streams while /stop arrives and "queued" waits behind it.
    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 100}}))
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-stop-running")
    # About 50 chunks: seconds of streaming, so /stop surely lands mid-reply even on a stalled machine.
    await client.message("long", "a long answer that is still streaming when stop arrives " * 5)
    await client.until(lambda f: f.get("type") == "draft" and f.get("in_reply_to") == "long")
    await client.message("queued", "waiting behind the long one")
    stop = await client.ask("x1", "/stop")
    assert stop[-1]["text"].startswith("Stopped.")
    # Neither the stopped reply nor the dropped message is answered: the next message comes first.
    after = await client.ask("m2", "fresh start")
    assert after[-1]["text"] == "echo: fresh start"
    answered = {f.get("in_reply_to") for f in stop + after if f.get("type") == "final"}
    assert answered == {"x1", "m2"}


async def test_unknown_slash_word_goes_to_the_agent(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-foo")
    frames = await client.ask("f1", "/foo")
    assert frames[0] == {"type": "ack", "id": "f1", "duplicate": False}
    assert frames[-1]["text"] == "echo: /foo"


async def test_healthz_answers_ok(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=FRAME_TIMEOUT) as http:
        response = await http.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def _samples(text: str) -> dict[str, float]:
    """Sample name (with sorted labels) -> value."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def _total(samples: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in samples.items() if k.startswith(prefix))


async def test_metrics_are_prometheus_text_counting_the_traffic(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-metrics")
    await client.ask("m1", "count me")
    await client.message("m1", "count me")  # a duplicate
    await client.sync()

    wanted = {
        "chatgate_admitted_total{platform=web}": 1.0,
        "chatgate_duplicates_total{platform=web}": 1.0,
        "chatgate_turns_total": 1.0,  # summed over outcomes
        "chatgate_deliveries_total": 1.0,  # summed over outcomes
    }
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=FRAME_TIMEOUT) as http:
        # Turn and delivery counters are bumped just after the final is sent; poll until they show.
        deadline = asyncio.get_running_loop().time() + FRAME_TIMEOUT
        while True:
            response = await http.get("/metrics")
            assert response.status_code == 200
            samples = _samples(response.text)
            got = {
                "chatgate_admitted_total{platform=web}": _total(
                    samples, "chatgate_admitted_total{platform=web}"
                ),
                "chatgate_duplicates_total{platform=web}": _total(
                    samples, "chatgate_duplicates_total{platform=web}"
                ),
                "chatgate_turns_total": _total(samples, "chatgate_turns_total{"),
                "chatgate_deliveries_total": _total(samples, "chatgate_deliveries_total{"),
            }
            lag_count = samples.get("chatgate_event_loop_lag_seconds_count{}", 0)
            if (got == wanted and lag_count > 0) or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)

    assert response.headers["content-type"].startswith("text/plain")
    for name in (
        "chatgate_admitted_total",
        "chatgate_duplicates_total",
        "chatgate_turns_total",
        "chatgate_deliveries_total",
        "chatgate_queue_depth",
        "chatgate_event_loop_lag_seconds",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in response.text or f"# TYPE {name}" in response.text
        assert f"\n{name}" in response.text, f"{name} has no sample"
    assert got == wanted
    assert lag_count > 0, "the event-loop lag monitor never reported"
    assert samples["chatgate_queue_depth{}"] == 0.0
