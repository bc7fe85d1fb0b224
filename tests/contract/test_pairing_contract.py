"""The pairing role's contract: one live code per stranger, its reply recorded with it and
rate-limited, approval once per code, wrong and expired codes counted towards a lockout, and
everything bounded and durable across a reopen. Time is passed in (``now``), never slept."""

from __future__ import annotations

from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.pairing import CODE_ALPHABET, CODE_LENGTH, PairingLimits, PairingRequest
from chatgate.domain.store_roles import Pairing, PairingReads
from contract.kit import T0, covers, draft

LIMITS = PairingLimits(
    code_ttl_seconds=3600,
    max_pending=3,
    reply_interval_seconds=600,
    max_failed_approvals=3,
    lockout_seconds=900,
)


def notice(request: PairingRequest) -> OutboxDraft:
    return draft(f"pair:{request.platform}:{request.user_id}:{request.code}", request.chat_id or "")


async def ask(store, user: str = "u1", now: float = T0, *, platform: str = "telegram", limits=LIMITS):
    return await store.request_pairing(platform, user, f"name {user}", f"c-{user}", now, limits, notice)


async def notices(store) -> list[str]:
    return sorted(row.idem_key for row in await store.claim_outbox(100))


@covers(Pairing.request_pairing, Pairing.pending_pairings)
async def test_a_stranger_gets_one_code_of_eight_unambiguous_characters_and_its_reply_once(store):
    first = await ask(store)
    assert first.replied and first.request is not None
    code = first.request.code
    assert len(code) == CODE_LENGTH and set(code) <= set(CODE_ALPHABET)
    assert not set(code) & set("0O1IL")
    assert first.request.expires_at == T0 + 3600
    again = await ask(store, now=T0 + 30)
    assert again.request == first.request and not again.replied  # same code, no second reply yet
    later = await ask(store, now=T0 + 601)
    assert later.request is not None and later.request.code == code and later.replied
    assert await notices(store) == [f"pair:telegram:u1:{code}"]  # the same notice key: recorded once
    (pending,) = await store.pending_pairings(T0 + 700)
    seen = (pending.code, pending.user_id, pending.user_name, pending.chat_id)
    assert seen == (code, "u1", "name u1", "c-u1")


@covers(Pairing.request_pairing, Pairing.pending_pairings)
async def test_live_codes_per_platform_are_bounded_and_an_expired_one_frees_its_place(store):
    codes = [(await ask(store, f"u{n}")).request for n in range(3)]
    assert all(codes) and len({c.code for c in codes if c}) == 3
    full = await ask(store, "u9")
    assert full.request is None and not full.replied
    other = await ask(store, "u9", platform="discord")  # the bound is per platform
    assert other.request is not None
    assert len(await notices(store)) == 4
    assert [p.user_id for p in await store.pending_pairings(T0 + 3601)] == []
    renewed = await ask(store, "u9", T0 + 3601)
    assert renewed.request is not None and renewed.replied
    assert renewed.request.expires_at == T0 + 3601 + 3600


@covers(Pairing.approve_pairing, PairingReads.paired_users, Pairing.pending_pairings)
async def test_approving_a_code_pairs_its_user_once_whatever_case_or_dashes_the_operator_types(store):
    request = (await ask(store)).request
    assert request is not None
    typed = f"{request.code[:4].lower()}-{request.code[4:]}"
    result = await store.approve_pairing(typed, T0 + 10, LIMITS)
    assert result.outcome == "approved" and result.user is not None
    assert (result.user.platform, result.user.user_id, result.user.user_name) == ("telegram", "u1", "name u1")
    (paired,) = await store.paired_users("telegram")
    assert (paired.user_id, paired.approved_at, paired.code) == ("u1", T0 + 10, request.code)
    assert await store.paired_users("discord") == []
    assert [p.user_id for p in await store.paired_users()] == ["u1"]
    assert await store.pending_pairings(T0 + 10) == []
    assert (await store.approve_pairing(request.code, T0 + 11, LIMITS)).outcome == "unknown"  # one-time


@covers(Pairing.approve_pairing)
async def test_an_expired_code_is_refused_and_counts_as_a_failure(store):
    request = (await ask(store)).request
    assert request is not None
    result = await store.approve_pairing(request.code, T0 + 3600, LIMITS)
    assert (result.outcome, result.failures) == ("expired", 1)
    assert await store.paired_users() == []


@covers(Pairing.approve_pairing)
async def test_wrong_codes_lock_approval_out_even_for_the_right_code_until_the_lockout_ends(store):
    request = (await ask(store)).request
    assert request is not None
    outcomes = [await store.approve_pairing("WRONG" + str(n) * 3, T0 + n, LIMITS) for n in range(2, 5)]
    assert [o.outcome for o in outcomes] == ["unknown"] * 3
    assert outcomes[-1].locked_until == T0 + 4 + 900
    locked = await store.approve_pairing(request.code, T0 + 100, LIMITS)
    assert (locked.outcome, locked.locked_until) == ("locked", T0 + 4 + 900)
    assert await store.paired_users() == []
    assert (await store.approve_pairing(request.code, T0 + 905, LIMITS)).outcome == "approved"
    wrong = await store.approve_pairing("ZZZZZZZZ", T0 + 906, LIMITS)
    assert wrong.failures == 1  # a success reset the count


@covers(Pairing.revoke_pairing, PairingReads.paired_users)
async def test_revoking_forgets_the_user_and_their_code_and_says_whether_there_was_one(store):
    request = (await ask(store)).request
    assert request is not None
    await store.approve_pairing(request.code, T0 + 1, LIMITS)
    await ask(store, "u2")
    assert await store.revoke_pairing("telegram", "u1") is True
    assert await store.paired_users() == []
    assert await store.revoke_pairing("telegram", "u1") is False
    assert await store.revoke_pairing("telegram", "u2") is False  # no approval, but its code is gone
    assert await store.pending_pairings(T0 + 2) == []


@covers(Pairing.request_pairing, Pairing.approve_pairing, PairingReads.paired_users)
async def test_codes_approvals_and_the_lockout_survive_a_reopen(open_store):
    store = await open_store()
    request = (await ask(store)).request
    assert request is not None
    for n in range(3):
        await store.approve_pairing(f"BADCODE{n + 2}", T0 + n, LIMITS)
    await store.close()
    again = await open_store()
    assert (await again.approve_pairing(request.code, T0 + 10, LIMITS)).outcome == "locked"
    assert (await again.approve_pairing(request.code, T0 + 903, LIMITS)).outcome == "approved"
    await again.close()
    third = await open_store()
    assert [p.user_id for p in await third.paired_users("telegram")] == ["u1"]
