"""Admission with pairing on: a stranger's DM is refused with a code sent through the outbox
(never admitted as a turn); a stranger in a group is refused without a reply; once approved
in the store the user is admitted on every lane, and a revocation shuts them out again."""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING, Any

import pytest

from chatgate.domain.pairing import CODE_ALPHABET, PairingLimits
from chatgate.engine.authz import PAIRED_CACHE_SECONDS, PlatformAccess
from chatgate.engine.intake import AdmissionRefused
from support.engine_harness import PLATFORM, wait_until

if TYPE_CHECKING:
    from support.engine_harness import Harness, MakeHarness

CODE = re.compile(rf"\b[{CODE_ALPHABET}]{{8}}\b")


async def refused(h: Harness, text: str, **kw: Any) -> str:
    with pytest.raises(AdmissionRefused) as caught:
        await h.send(text, **kw)
    return caught.value.code


def notices(h: Harness) -> list[str]:
    return [r.text for r in h.adapter.delivered if r.kind == "notice"]


async def test_a_stranger_gets_a_code_once_is_admitted_after_approval_and_shut_out_after_revocation(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(rules={PLATFORM: PlatformAccess(pairing=True)})
    assert await refused(h, "hi", user_id="kim", chat_id="dm-kim", delivery_id="k1") == "pairing_required"
    await wait_until(lambda: notices(h), 10, "the pairing notice")
    (text,) = notices(h)
    found = CODE.search(text)
    assert found and "chatgate pairing approve" in text
    assert await refused(h, "hi", user_id="kim", chat_id="dm-kim", delivery_id="k1") == "pairing_required"
    assert await refused(h, "again", user_id="kim", chat_id="dm-kim") == "pairing_required"
    assert h.query("SELECT COUNT(*) FROM inbox")[0][0] == 0  # nothing became a turn
    assert h.metric("chatgate_refused_total", platform=PLATFORM, code="pairing_required") == 3

    assert await refused(h, "hi all", user_id="eve", chat_id="g1", chat_type="group") == "unauthorized"
    assert h.query("SELECT COUNT(*) FROM pairing_requests WHERE user_id = 'eve'")[0][0] == 0

    approval = await h.store.approve_pairing(found.group(0), time.time(), PairingLimits())
    assert approval.outcome == "approved"
    await asyncio.sleep(PAIRED_CACHE_SECONDS + 0.1)  # the authorizer re-reads after its cache lifetime
    assert (await h.send("hello", user_id="kim", chat_id="dm-kim")).new
    assert (await h.send("/status", user_id="kim", chat_id="dm-kim")).new  # the command lane too
    assert (await h.send("in a group", user_id="kim", chat_id="g1", chat_type="group")).new
    assert await h.finals("dm-kim", 1) == ["echo: hello"]
    assert await h.finals("g1", 1) == ["echo: in a group"]
    await wait_until(lambda: h.adapter.texts("dm-kim", ("command",)), 10, "the /status reply")

    assert await h.store.revoke_pairing(PLATFORM, "kim")
    await asyncio.sleep(PAIRED_CACHE_SECONDS + 0.1)
    assert await refused(h, "back?", user_id="kim", chat_id="dm-kim") == "pairing_required"


async def test_without_pairing_a_stranger_is_refused_as_before_and_nothing_is_stored(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(rules={PLATFORM: PlatformAccess(allow_users=frozenset({"alice"}))})
    assert await refused(h, "hi", user_id="kim", chat_id="dm-kim") == "unauthorized"
    assert h.query("SELECT COUNT(*) FROM pairing_requests")[0][0] == 0
    assert h.query("SELECT COUNT(*) FROM outbox")[0][0] == 0
