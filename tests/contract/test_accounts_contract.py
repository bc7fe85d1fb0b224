"""The account roles' contract: users, sign-in tokens and sessions by hash only, revocation
that reaches every session, chat ownership, and a chat's history from what the pipeline stored."""

from __future__ import annotations

from msgspec.structs import replace

from chatgate.domain.accounts import (
    Account,
    SignInToken,
    WebSession,
    hash_secret,
    new_session_cookie,
    new_sign_in_token,
)
from chatgate.domain.outbound import FAILURE_KEY
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.store_roles import Accounts, Inbox, Leases, WebChats
from chatgate.domain.tool_steps import STEPS_KEY, ToolStep, dumps
from chatgate.domain.web_chats import DELETED_OWNER, NO_ROOM, REGENERATES_KEY
from contract.kit import T0, approval, covers, req
from support.store_values import outcome

ANN = Account("a00000000001", "ann", "user", T0)
BOB = Account("b00000000002", "bob", "admin", T0 + 1)


async def _session(
    store, account: Account, *, via: str | None = None, expires: float = T0 + 100
) -> tuple[str, str]:
    session_id, cookie = new_session_cookie()
    await store.create_web_session(
        WebSession(session_id, account.user_id, T0, expires, via), hash_secret(cookie)
    )
    return session_id, cookie


@covers(Accounts.create_account, Accounts.account_by_name, Accounts.list_accounts)
async def test_an_account_is_found_by_name_with_its_password_hash_and_a_taken_name_is_refused(store):
    assert await store.create_account(BOB, None) is True
    assert await store.create_account(ANN, "scrypt$hash") is True
    assert await store.create_account(Account("c00000000003", "ann", "admin", T0), None) is False
    assert await store.account_by_name("ann") == (ANN, "scrypt$hash")
    assert await store.account_by_name("bob") == (BOB, None)
    assert await store.account_by_name("nobody") is None
    assert await store.list_accounts() == [ANN, BOB]


@covers(Accounts.add_sign_in_token, Accounts.sign_in_token_by_hash, Accounts.list_sign_in_tokens)
async def test_a_sign_in_token_is_found_by_its_hash_only_with_its_user(store):
    await store.create_account(ANN, None)
    token_id, token = new_sign_in_token()
    await store.add_sign_in_token(SignInToken(token_id, ANN.user_id, T0), hash_secret(token))
    assert await store.sign_in_token_by_hash(hash_secret(token)) == (
        SignInToken(token_id, ANN.user_id, T0),
        ANN,
    )
    assert await store.sign_in_token_by_hash(hash_secret(token + "x")) is None
    assert await store.sign_in_token_by_hash(token) is None  # the token itself is not what is kept
    assert [t.token_id for t in await store.list_sign_in_tokens()] == [token_id]


@covers(Accounts.create_web_session, Accounts.signed_in, Accounts.end_web_session, Accounts.live_sessions)
async def test_a_session_is_valid_until_it_expires_or_is_ended(store):
    await store.create_account(ANN, None)
    first, cookie = await _session(store, ANN, expires=T0 + 100)
    second, other = await _session(store, ANN, expires=T0 + 50)
    found = await store.signed_in(hash_secret(cookie), T0 + 10)
    assert found is not None and found.account == ANN and found.session.session_id == first
    assert await store.signed_in(cookie, T0 + 10) is None
    assert await store.signed_in(hash_secret(other), T0 + 50) is None  # expired at T0 + 50
    assert await store.live_sessions([first, second, "nope"], T0 + 10) == {first, second}
    assert await store.live_sessions([first, second], T0 + 60) == {first}
    assert await store.live_sessions([], T0) == set()
    assert await store.end_web_session(first, T0 + 20) is True
    assert await store.end_web_session(first, T0 + 21) is False
    assert await store.signed_in(hash_secret(cookie), T0 + 22) is None
    assert await store.live_sessions([first], T0 + 22) == set()


@covers(Accounts.revoke_account, Accounts.signed_in, Accounts.live_sessions, Accounts.sign_in_token_by_hash)
async def test_revoking_an_account_ends_its_sessions_and_tokens_and_no_one_elses(store):
    await store.create_account(ANN, None)
    await store.create_account(BOB, None)
    token_id, token = new_sign_in_token()
    await store.add_sign_in_token(SignInToken(token_id, ANN.user_id, T0), hash_secret(token))
    ann_session, ann_cookie = await _session(store, ANN)
    bob_session, bob_cookie = await _session(store, BOB)
    assert await store.revoke_account(ANN.user_id, T0 + 5) is True
    assert await store.revoke_account(ANN.user_id, T0 + 6) is False
    assert await store.signed_in(hash_secret(ann_cookie), T0 + 7) is None
    assert await store.live_sessions([ann_session, bob_session], T0 + 7) == {bob_session}
    found = await store.sign_in_token_by_hash(hash_secret(token))
    assert found is not None and not found[0].active and not found[1].active
    assert await store.signed_in(hash_secret(bob_cookie), T0 + 7) is not None
    (ann, _), (bob, _) = await store.account_by_name("ann"), await store.account_by_name("bob")
    assert ann.revoked_at == T0 + 5 and bob.active


@covers(Accounts.revoke_sign_in_token, Accounts.live_sessions)
async def test_revoking_a_token_ends_only_the_sessions_signed_in_with_it(store):
    await store.create_account(ANN, None)
    token_id, token = new_sign_in_token()
    await store.add_sign_in_token(SignInToken(token_id, ANN.user_id, T0), hash_secret(token))
    with_token, _ = await _session(store, ANN, via=token_id)
    with_password, _ = await _session(store, ANN, via=None)
    assert await store.revoke_sign_in_token(token_id, T0 + 1) is True
    assert await store.revoke_sign_in_token(token_id, T0 + 2) is False
    assert await store.live_sessions([with_token, with_password], T0 + 3) == {with_password}
    assert [t.active for t in await store.list_sign_in_tokens()] == [False]


@covers(Accounts.create_account, Accounts.signed_in)
async def test_accounts_and_sessions_survive_a_reopen(open_store):
    store = await open_store()
    await store.create_account(ANN, "scrypt$x")
    _, cookie = await _session(store, ANN)
    await store.close()
    again = await open_store()
    assert await again.account_by_name("ann") == (ANN, "scrypt$x")
    assert (await again.signed_in(hash_secret(cookie), T0 + 1)) is not None


@covers(WebChats.claim_chat, WebChats.chat_owner)
async def test_the_first_claim_owns_a_chat_and_a_second_user_is_told_the_owner(store):
    assert await store.chat_owner("web", "c1") is None
    assert await store.claim_chat("web", "c1", "ann", T0) == "ann"
    assert await store.claim_chat("web", "c1", "bob", T0 + 1) == "ann"
    assert await store.claim_chat("web", "c1", "ann", T0 + 2) == "ann"
    assert await store.chat_owner("web", "c1") == "ann"
    assert await store.chat_owner("relay", "c1") is None  # chats are per platform


@covers(WebChats.set_chat_title, WebChats.list_chats)
async def test_titles_are_set_once_unless_replaced_and_each_user_lists_only_their_chats(store):
    await store.claim_chat("web", "c1", "ann", T0)
    await store.claim_chat("web", "c2", "ann", T0 + 1)
    await store.claim_chat("web", "c3", "bob", T0 + 2)
    await store.claim_chat("web", "c4", "bob", T0 + 3)  # never written to nor named: not listed
    await store.set_chat_title("web", "c3", "bob's", replace=True)
    assert await store.set_chat_title("web", "c1", "first words", replace=False) is True
    assert await store.set_chat_title("web", "c1", "second words", replace=False) is False
    assert await store.set_chat_title("web", "c2", "Renamed", replace=True) is True
    assert await store.set_chat_title("web", "nope", "x", replace=True) is False
    listed = await store.list_chats("web", "ann", None, 10)
    assert [(c.chat_id, c.title) for c in listed] == [("c2", "Renamed"), ("c1", "first words")]
    assert [c.chat_id for c in await store.list_chats("web", "bob", None, 10)] == ["c3"]
    assert [c.chat_id for c in await store.list_chats("web", "ann", None, 1)] == ["c2"]
    assert [c.chat_id for c in await store.list_chats("web", "ann", "FIRST", 10)] == ["c1"]
    assert await store.list_chats("web", "ann", "100%_", 10) == []  # wildcards are literal


@covers(WebChats.delete_chat, WebChats.list_chats, WebChats.claim_chat)
async def test_a_deleted_chat_is_nobodys_is_listed_by_none_and_cannot_be_claimed_again(store):
    await store.claim_chat("web", "c1", "ann", T0)
    await store.set_chat_title("web", "c1", "first words", replace=False)
    assert [c.chat_id for c in await store.list_chats("web", "ann", None, 10)] == ["c1"]
    assert await store.delete_chat("web", "c1") is True
    assert await store.delete_chat("web", "c1") is False  # once
    assert await store.delete_chat("web", "nope") is False
    assert await store.list_chats("web", "ann", None, 10) == []
    assert await store.claim_chat("web", "c1", "ann", T0 + 1) == DELETED_OWNER
    assert await store.chat_owner("web", "c1") == DELETED_OWNER
    assert await store.list_chats("web", DELETED_OWNER, None, 10) == []  # untitled, no session


@covers(WebChats.claim_chat, WebChats.delete_chat)
async def test_a_user_may_own_at_most_so_many_chats_and_deleting_one_makes_room(store):
    assert await store.claim_chat("web", "c1", "ann", T0, 2) == "ann"
    assert await store.claim_chat("web", "c2", "ann", T0, 2) == "ann"
    assert await store.claim_chat("web", "c3", "ann", T0, 2) == NO_ROOM
    assert await store.chat_owner("web", "c3") is None, "nothing was recorded"
    assert await store.claim_chat("web", "c1", "ann", T0, 2) == "ann", "an existing chat still opens"
    assert await store.claim_chat("web", "c3", "bob", T0, 2) == "bob", "the bound is per user"
    assert await store.delete_chat("web", "c2") is True
    assert await store.claim_chat("web", "c4", "ann", T0, 2) == "ann"


@covers(WebChats.list_chats, Inbox.admit, Leases.complete_turn)
async def test_search_finds_words_and_word_starts_in_messages_and_replies_of_the_users_own_chats(store):
    await store.claim_chat("web", "c1", "ann", T0)
    await store.claim_chat("web", "c2", "ann", T0)
    await store.claim_chat("web", "c3", "bob", T0)
    await _answered(store, "c1", "m1", "tell me about lanterns", "a lantern is a lamp")
    await _answered(store, "c2", "m2", "and harbors", "a harbor shelters boats")
    await _answered(store, "c3", "m3", "lanterns again", "bob's lantern")
    assert [c.chat_id for c in await store.list_chats("web", "ann", "lantern", 10)] == ["c1"]
    assert [c.chat_id for c in await store.list_chats("web", "ann", "Lant", 10)] == ["c1"], "a word's start"
    assert [c.chat_id for c in await store.list_chats("web", "ann", "shelters boats", 10)] == ["c2"]
    assert await store.list_chats("web", "ann", "lantern boats", 10) == [], "every word, in one chat"
    assert [c.chat_id for c in await store.list_chats("web", "bob", "lantern", 10)] == ["c3"]
    assert await store.list_chats("web", "ann", '" OR * NEAR(', 10) == [], "no syntax gets through"


@covers(WebChats.chat_history)
async def test_a_chats_history_carries_a_replys_tool_steps_and_what_regenerate_asked_again(store):
    steps = [ToolStep("shell", "rm -rf ./x", "done"), ToolStep("shell", "sleep 99")]
    await _answered(store, "c1", "m1", "clean up", "removed", **{STEPS_KEY: dumps(steps)})
    await _answered(store, "c1", "m2", "clean up", "removed again", payload={REGENERATES_KEY: "m1"})
    await _answered(store, "c1", "m3", "clean up", "typed twice")
    asked, answer, again, second, typed, third = await store.chat_history("web", "c1", None, 10)
    assert answer.steps == tuple(steps) and second.steps == () and third.steps == ()
    assert (asked.regenerates, again.regenerates, typed.regenerates) == (None, "m1", None)


async def _answered(
    store,
    chat_id: str,
    delivery_id: str,
    text: str,
    reply: str,
    payload: dict | None = None,
    **target: object,
) -> None:
    admit = req(delivery_id, f"k-{chat_id}", text, transport="web", platform="web", chat_id=chat_id)
    if payload:
        admit = replace(admit, inbound=replace(admit.inbound, payload=payload))
    await store.admit(admit)
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    final = OutboxDraft(
        f"final:{claim.items[0].seq}",
        "web",
        chat_id,
        f"k-{chat_id}",
        "final",
        reply,
        delivery_id,
        dict(target),
    )
    assert await store.complete_turn("w1", outcome(claim, final, reply=reply), 30.0, 1) is None


@covers(WebChats.chat_history, WebChats.list_chats, Inbox.admit, Leases.complete_turn)
async def test_a_chats_history_is_its_messages_and_replies_in_order_paged_and_searchable(store):
    await store.claim_chat("web", "c1", "ann", T0)
    await store.claim_chat("web", "c2", "ann", T0)
    await _answered(store, "c1", "m1", "what is a lease", "a row with an owner")
    await _answered(store, "c1", "m2", "and a fence", "sorry, that failed", **{FAILURE_KEY: "agent_error"})
    await _answered(store, "c2", "m3", "other chat", "other answer")
    items = await store.chat_history("web", "c1", None, 10)
    assert [(i.kind, i.text) for i in items] == [
        ("me", "what is a lease"),
        ("bot", "a row with an owner"),
        ("me", "and a fence"),
        ("failure", "sorry, that failed"),
    ]
    assert items[0].id == "m1" and items[1].id.startswith("o") and items[1].in_reply_to == "m1"
    newest = await store.chat_history("web", "c1", None, 2)
    assert [i.text for i in newest] == ["and a fence", "sorry, that failed"]
    older = await store.chat_history("web", "c1", newest[0].at, 10)
    assert [i.text for i in older] == ["what is a lease", "a row with an owner"]
    assert await store.chat_history("web", "nope", None, 10) == []
    assert [c.chat_id for c in await store.list_chats("web", "ann", "A ROW WITH", 10)] == ["c1"]
    assert [c.chat_id for c in await store.list_chats("web", "ann", "other chat", 10)] == ["c2"]


@covers(WebChats.chat_history)
async def test_a_chats_history_carries_its_approval_prompts_with_their_state(store):
    await store.create_approval(approval("n1.00000001", platform="web", chat_id="c1"))
    await store.create_approval(approval("n1.00000002", platform="web", chat_id="c2"))
    (item,) = await store.chat_history("web", "c1", None, 10)
    assert (item.kind, item.id, item.outcome) == ("prompt", "n1.00000001", "pending")
    assert item.text == "Approval needed: rm -rf ./x"
