"""The session key: byte-compatible with the Hermes relay contract's ``build_session_key``.

Format: ``agent:<ns>:<platform>:<chat_type>[:<slack scope>][:<chat_id>]...``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from chatgate.domain.session_key import (
    IsolationPolicy,
    PolicyOverride,
    is_shared_session,
    key_namespace,
    resolve_policy,
    session_key,
)
from chatgate.domain.source import CHAT_TYPES, Source, canonical_source

PER_USER = IsolationPolicy(group_sessions_per_user=True, thread_sessions_per_user=False)
SHARED = IsolationPolicy(group_sessions_per_user=False, thread_sessions_per_user=False)
THREAD_PER_USER = IsolationPolicy(group_sessions_per_user=True, thread_sessions_per_user=True)
THREAD_ONLY_PER_USER = IsolationPolicy(group_sessions_per_user=False, thread_sessions_per_user=True)
ALL_POLICIES = (PER_USER, SHARED, THREAD_PER_USER, THREAD_ONLY_PER_USER)


def group(**kw: object) -> Source:
    fields: dict[str, object] = {
        "platform": "discord",
        "chat_id": "c1",
        "chat_type": "group",
        "user_id": "u1",
    }
    fields.update(kw)
    return Source(**fields)  # type: ignore[arg-type]


def discord_thread(**kw: object) -> Source:
    # Discord: a thread is its own chat, so chat_id == thread_id.
    fields: dict[str, object] = {
        "platform": "discord",
        "chat_id": "th1",
        "chat_type": "thread",
        "thread_id": "th1",
        "user_id": "u1",
        "parent_chat_id": "c1",
    }
    fields.update(kw)
    return Source(**fields)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- defaults


def test_default_policy_isolates_group_users_and_shares_threads() -> None:
    assert IsolationPolicy() == PER_USER


# --------------------------------------------------------------------------- DMs


def test_telegram_dm_keys_by_chat_id_alone() -> None:
    src = Source(platform="telegram", chat_id="12345", chat_type="dm", user_id="12345")
    assert session_key(src) == "agent:main:telegram:dm:12345"


def test_dm_with_chat_id_never_gets_a_user_suffix_even_if_user_differs() -> None:
    src = Source(platform="telegram", chat_id="c9", chat_type="dm", user_id="u1", user_id_alt="alt1")
    assert session_key(src) == "agent:main:telegram:dm:c9"


def test_dm_with_chat_id_and_thread_appends_thread_after_chat() -> None:
    src = Source(platform="telegram", chat_id="c9", chat_type="dm", user_id="u1", thread_id="t1")
    assert session_key(src) == "agent:main:telegram:dm:c9:t1"


def test_dm_without_chat_id_falls_back_to_user_id() -> None:
    src = Source(platform="webchat", chat_id=None, chat_type="dm", user_id="u1")
    assert session_key(src) == "agent:main:webchat:dm:u1"


def test_dm_without_chat_id_prefers_user_id_alt_over_user_id() -> None:
    src = Source(platform="webchat", chat_id=None, chat_type="dm", user_id="u1", user_id_alt="alt1")
    assert session_key(src) == "agent:main:webchat:dm:alt1"


def test_dm_without_chat_id_puts_user_before_thread() -> None:
    src = Source(platform="webchat", chat_id=None, chat_type="dm", user_id="u1", thread_id="t1")
    assert session_key(src) == "agent:main:webchat:dm:u1:t1"


def test_dm_without_chat_id_or_user_keys_by_thread_alone() -> None:
    src = Source(platform="webchat", chat_id=None, chat_type="dm", thread_id="t1")
    assert session_key(src) == "agent:main:webchat:dm:t1"


def test_dm_without_any_id_is_the_bare_dm_key() -> None:
    src = Source(platform="webchat", chat_id=None, chat_type="dm")
    assert session_key(src) == "agent:main:webchat:dm"


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_dm_key_ignores_isolation_policy(policy: IsolationPolicy) -> None:
    with_chat = Source(platform="telegram", chat_id="c9", chat_type="dm", user_id="u1")
    without_chat = Source(platform="telegram", chat_id=None, chat_type="dm", user_id="u1")
    assert session_key(with_chat, policy) == "agent:main:telegram:dm:c9"
    assert session_key(without_chat, policy) == "agent:main:telegram:dm:u1"


# --------------------------------------------------------------------------- groups


def test_group_per_user_appends_the_participant() -> None:
    assert session_key(group(), PER_USER) == "agent:main:discord:group:c1:u1"


def test_group_shared_has_no_participant() -> None:
    assert session_key(group(), SHARED) == "agent:main:discord:group:c1"


def test_group_shared_key_is_the_same_for_different_users() -> None:
    assert session_key(group(user_id="u1"), SHARED) == session_key(group(user_id="u2"), SHARED)


def test_group_per_user_key_differs_for_different_users() -> None:
    assert session_key(group(user_id="u1"), PER_USER) != session_key(group(user_id="u2"), PER_USER)


def test_group_participant_prefers_user_id_alt() -> None:
    assert session_key(group(user_id_alt="alt1"), PER_USER) == "agent:main:discord:group:c1:alt1"


def test_group_without_user_id_gets_no_participant_suffix() -> None:
    assert session_key(group(user_id=None), PER_USER) == "agent:main:discord:group:c1"


def test_channel_chat_type_follows_group_rules() -> None:
    src = group(chat_type="channel")
    assert session_key(src, PER_USER) == "agent:main:discord:channel:c1:u1"
    assert session_key(src, SHARED) == "agent:main:discord:channel:c1"


def test_group_thread_appends_thread_before_participant_when_thread_is_per_user() -> None:
    src = group(platform="telegram", chat_type="forum", thread_id="t7")
    assert session_key(src, THREAD_PER_USER) == "agent:main:telegram:forum:c1:t7:u1"
    assert session_key(src, PER_USER) == "agent:main:telegram:forum:c1:t7"


# --------------------------------------------------------------------------- threads


def test_discord_thread_text_message_is_shared_by_default() -> None:
    assert session_key(discord_thread()) == "agent:main:discord:thread:th1:th1"


def test_shared_thread_key_is_the_same_for_different_users() -> None:
    assert session_key(discord_thread(user_id="u1")) == session_key(discord_thread(user_id="u2"))


def test_thread_per_user_appends_the_participant() -> None:
    assert session_key(discord_thread(), THREAD_PER_USER) == "agent:main:discord:thread:th1:th1:u1"


def test_thread_per_user_needs_group_per_user_too() -> None:
    # participant only when group_sessions_per_user AND NOT (thread and not thread-per-user)
    assert session_key(discord_thread(), THREAD_ONLY_PER_USER) == ("agent:main:discord:thread:th1:th1")


def test_thread_key_does_not_include_parent_chat_id() -> None:
    a = session_key(discord_thread(parent_chat_id="c1"))
    b = session_key(discord_thread(parent_chat_id="c2"))
    assert a == b == "agent:main:discord:thread:th1:th1"


# --------------------------------------------------------------------------- empty ids


def test_empty_string_ids_are_omitted_not_joined_as_empty_segments() -> None:
    src = Source(
        platform="slack", chat_id="", chat_type="group", user_id="", thread_id="", scope_id="", user_id_alt=""
    )
    assert session_key(src, THREAD_PER_USER) == "agent:main:slack:group"


def test_empty_user_id_alt_falls_back_to_user_id() -> None:
    assert session_key(group(user_id_alt=""), PER_USER) == "agent:main:discord:group:c1:u1"


def test_empty_chat_id_in_dm_counts_as_missing_so_user_is_used() -> None:
    src = Source(platform="webchat", chat_id="", chat_type="dm", user_id="u1", thread_id="")
    assert session_key(src) == "agent:main:webchat:dm:u1"


def test_empty_thread_id_does_not_make_a_group_a_shared_thread() -> None:
    assert session_key(group(thread_id=""), PER_USER) == "agent:main:discord:group:c1:u1"


# --------------------------------------------------------------------------- policy overrides


def test_resolve_policy_without_override_returns_the_default() -> None:
    assert resolve_policy("discord", SHARED, {}) == SHARED
    assert resolve_policy("discord", PER_USER, {"slack": PolicyOverride(False, True)}) == PER_USER


def test_platform_override_turns_per_user_off_while_default_is_on() -> None:
    overrides = {"discord": PolicyOverride(group_sessions_per_user=False)}
    policy = resolve_policy("discord", PER_USER, overrides)
    assert policy.group_sessions_per_user is False
    assert session_key(group(), policy) == "agent:main:discord:group:c1"
    # another platform keeps the default
    tg = group(platform="telegram")
    assert session_key(tg, resolve_policy("telegram", PER_USER, overrides)) == (
        "agent:main:telegram:group:c1:u1"
    )


def test_platform_override_turns_per_user_on_while_default_is_off() -> None:
    overrides = {"discord": PolicyOverride(group_sessions_per_user=True)}
    policy = resolve_policy("discord", SHARED, overrides)
    assert policy.group_sessions_per_user is True
    assert session_key(group(), policy) == "agent:main:discord:group:c1:u1"
    tg = group(platform="telegram")
    assert session_key(tg, resolve_policy("telegram", SHARED, overrides)) == ("agent:main:telegram:group:c1")


def test_platform_override_turns_thread_per_user_on_while_default_is_off() -> None:
    policy = resolve_policy("discord", PER_USER, {"discord": PolicyOverride(thread_sessions_per_user=True)})
    assert policy == THREAD_PER_USER
    assert session_key(discord_thread(), policy) == "agent:main:discord:thread:th1:th1:u1"


def test_platform_override_turns_thread_per_user_off_while_default_is_on() -> None:
    policy = resolve_policy(
        "discord", THREAD_PER_USER, {"discord": PolicyOverride(thread_sessions_per_user=False)}
    )
    assert policy == PER_USER
    assert session_key(discord_thread(), policy) == "agent:main:discord:thread:th1:th1"


@pytest.mark.parametrize("default", ALL_POLICIES)
def test_unset_override_fields_fall_back_to_the_default(default: IsolationPolicy) -> None:
    assert resolve_policy("x", default, {"x": PolicyOverride()}) == default
    only_group = resolve_policy("x", default, {"x": PolicyOverride(group_sessions_per_user=False)})
    assert only_group.thread_sessions_per_user is default.thread_sessions_per_user
    only_thread = resolve_policy("x", default, {"x": PolicyOverride(thread_sessions_per_user=True)})
    assert only_thread.group_sessions_per_user is default.group_sessions_per_user


# --------------------------------------------------------------------------- slack scope
# The relay contract's key carries no workspace: a connector binds follow_up and
# interrupt_inbound by it. Workspaces are kept apart by the store's scope binding
# (tests/engine/test_scope_isolation.py); ``scoped=True`` is the second workspace's key.


def test_slack_group_key_is_the_contracts_byte_for_byte() -> None:
    src = Source(platform="slack", chat_id="C1", chat_type="group", user_id="U1", scope_id="T1")
    assert session_key(src, PER_USER) == "agent:main:slack:group:C1:U1"


def test_slack_thread_key_is_the_contracts_byte_for_byte() -> None:
    src = Source(
        platform="slack", chat_id="C1", chat_type="group", user_id="U1", scope_id="T1", thread_id="171.5"
    )
    assert session_key(src) == "agent:main:slack:group:C1:171.5"
    assert session_key(src, THREAD_PER_USER) == "agent:main:slack:group:C1:171.5:U1"


def test_slack_dm_key_is_the_contracts_byte_for_byte() -> None:
    src = Source(platform="slack", chat_id="D1", chat_type="dm", user_id="U1", scope_id="T1")
    assert session_key(src) == "agent:main:slack:dm:D1"


def test_the_scoped_key_puts_the_scope_right_after_chat_type() -> None:
    src = Source(platform="slack", chat_id="C1", chat_type="group", user_id="U1", scope_id="T1")
    assert session_key(src, PER_USER, scoped=True) == "agent:main:slack:group:T1:C1:U1"
    thread = replace(src, thread_id="171.5")
    assert session_key(thread, scoped=True) == "agent:main:slack:group:T1:C1:171.5"


def test_scoped_keys_of_two_workspaces_with_the_same_channel_id_differ() -> None:
    a = Source(platform="slack", chat_id="C1", chat_type="group", scope_id="T1")
    b = replace(a, scope_id="T2")
    assert session_key(a) == session_key(b)
    assert session_key(a, scoped=True) != session_key(b, scoped=True)


def test_a_scoped_key_without_a_scope_is_the_contracts() -> None:
    src = Source(platform="slack", chat_id="C1", chat_type="group", user_id="U1")
    assert session_key(src, PER_USER, scoped=True) == session_key(src, PER_USER)


def test_discord_does_not_include_the_guild_scope() -> None:
    assert session_key(group(scope_id="guild9"), PER_USER) == "agent:main:discord:group:c1:u1"


# --------------------------------------------------------------------------- profile namespace


@pytest.mark.parametrize("profile", [None, "", "default"])
def test_no_or_default_profile_keys_as_agent_main(profile: str | None) -> None:
    assert key_namespace(profile) == "agent:main"
    assert session_key(group(), PER_USER, profile) == "agent:main:discord:group:c1:u1"


def test_profile_literally_named_main_is_marked_so_it_never_shares_default_sessions() -> None:
    assert key_namespace("main") == "agent:main~"
    assert session_key(group(), PER_USER, "main") == "agent:main~:discord:group:c1:u1"
    assert session_key(group(), PER_USER, "main") != session_key(group(), PER_USER, None)


def test_other_profile_is_its_own_namespace() -> None:
    assert key_namespace("work") == "agent:work"
    assert session_key(discord_thread(), PER_USER, "work") == "agent:work:discord:thread:th1:th1"


# --------------------------------------------------------------------------- canonical_source


def test_canonical_source_strips_whitespace_from_ids_so_lanes_share_a_key() -> None:
    text_lane = canonical_source(group(chat_id="  c1 ", user_id="u1\n"))
    button_lane = canonical_source(group(chat_id="c1", user_id="u1"))
    assert text_lane.chat_id == "c1"
    assert text_lane.user_id == "u1"
    assert session_key(text_lane) == session_key(button_lane) == "agent:main:discord:group:c1:u1"


def test_canonical_source_turns_int_ids_into_strings() -> None:
    src = canonical_source(
        Source(
            platform="telegram",
            chat_id=12345,
            chat_type="dm",  # type: ignore[arg-type]
            user_id=67,
            thread_id=0,
        )
    )  # type: ignore[arg-type]
    assert src.chat_id == "12345"
    assert src.user_id == "67"
    assert src.thread_id == "0"
    assert session_key(src) == session_key(
        canonical_source(
            Source(platform="telegram", chat_id="12345", chat_type="dm", user_id="67", thread_id="0")
        )
    )


@pytest.mark.parametrize("blank", ["", "   ", "\t\n", None])
def test_canonical_source_maps_blank_ids_and_labels_to_none(blank: str | None) -> None:
    src = canonical_source(
        Source(
            platform="discord",
            chat_id=blank,
            chat_type="group",
            user_id=blank,
            user_name=blank,
            thread_id=blank,
            parent_chat_id=blank,
            scope_id=blank,
            chat_name=blank,
            chat_topic=blank,
            user_id_alt=blank,
        )
    )
    for name in (
        "chat_id",
        "user_id",
        "user_name",
        "thread_id",
        "parent_chat_id",
        "scope_id",
        "chat_name",
        "chat_topic",
        "user_id_alt",
    ):
        assert getattr(src, name) is None, name


def test_canonical_source_lowercases_platform_and_chat_type() -> None:
    src = canonical_source(Source(platform=" Discord ", chat_id="c1", chat_type=" GROUP ", user_id="u1"))  # type: ignore[arg-type]
    assert (src.platform, src.chat_type) == ("discord", "group")
    assert session_key(src) == "agent:main:discord:group:c1:u1"


def test_canonical_source_defaults_blank_chat_type_to_dm() -> None:
    src = canonical_source(Source(platform="x", chat_id="c1", chat_type=""))  # type: ignore[arg-type]
    assert src.chat_type == "dm"


def test_canonical_source_rejects_unknown_chat_type() -> None:
    with pytest.raises(ValueError, match="unknown chat_type"):
        canonical_source(Source(platform="x", chat_id="c1", chat_type="room"))  # type: ignore[arg-type]


@pytest.mark.parametrize("platform", ["", "  "])
def test_canonical_source_requires_a_platform(platform: str) -> None:
    with pytest.raises(ValueError, match="platform"):
        canonical_source(Source(platform=platform, chat_id="c1"))


def test_canonical_source_is_idempotent() -> None:
    once = canonical_source(group(chat_id=" c1 ", chat_name=" General "))
    assert canonical_source(once) == once


def test_source_from_dict_canonicalizes_and_ignores_unknown_keys() -> None:
    src = Source.from_dict(
        {"platform": "Discord", "chat_id": " c1 ", "chat_type": "group", "user_id": 42, "bogus": "x"}
    )
    assert src == Source(platform="discord", chat_id="c1", chat_type="group", user_id="42")


def test_source_dict_round_trip_preserves_every_field() -> None:
    src = Source(
        platform="slack",
        chat_id="C1",
        chat_type="thread",
        user_id="U1",
        user_name="Ann",
        thread_id="171.5",
        parent_chat_id="C0",
        scope_id="T1",
        chat_name="general",
        chat_topic="ops",
        user_id_alt="alt",
    )
    assert Source.from_dict(src.to_dict()) == src


# --------------------------------------------------------------------------- is_shared_session


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_dm_is_never_a_shared_session(policy: IsolationPolicy) -> None:
    src = Source(platform="telegram", chat_id="c9", chat_type="dm", user_id="u1", thread_id="t1")
    assert is_shared_session(src, policy) is False


def test_group_per_user_is_not_shared() -> None:
    assert is_shared_session(group(), PER_USER) is False


def test_group_without_per_user_is_shared() -> None:
    assert is_shared_session(group(), SHARED) is True


def test_thread_is_shared_by_default() -> None:
    assert is_shared_session(discord_thread(), PER_USER) is True


def test_thread_per_user_is_not_shared() -> None:
    assert is_shared_session(discord_thread(), THREAD_PER_USER) is False


_AGREEMENT_CASES = [
    pytest.param(
        policy,
        in_thread,
        id=f"group={policy.group_sessions_per_user}-"
        f"thread={policy.thread_sessions_per_user}-"
        f"in_thread={in_thread}",
    )
    for policy in (PER_USER, SHARED, THREAD_PER_USER)
    for in_thread in (False, True)
] + [
    pytest.param(THREAD_ONLY_PER_USER, False, id="group=False-thread=True-in_thread=False"),
    pytest.param(THREAD_ONLY_PER_USER, True, id="group=False-thread=True-in_thread=True"),
]


@pytest.mark.parametrize(("policy", "in_thread"), _AGREEMENT_CASES)
def test_is_shared_session_iff_the_key_carries_no_participant(
    policy: IsolationPolicy, in_thread: bool
) -> None:
    src = group(thread_id="t1" if in_thread else None)
    key_has_user = session_key(src, policy).endswith(":u1")
    assert is_shared_session(src, policy) is (not key_has_user)


# --------------------------------------------------------------------------- properties

# Colon-free ids: the contract joins with ':' and does not escape, so ids containing ':'
# can collide by construction (e.g. chat "c:u" vs chat "c" + user "u"). Adapters
# produce colon-free ids for the collision property below.
_ID_ALPHABET = st.characters(whitelist_categories=("Lu", "Ll", "Nd"), whitelist_characters="-_.")
ids = st.text(_ID_ALPHABET, min_size=1, max_size=12)
maybe_ids = st.none() | ids
labels = st.none() | st.text(max_size=30)
platforms = st.sampled_from(["discord", "slack", "telegram", "webchat", "matrix"])
chat_types = st.sampled_from(sorted(CHAT_TYPES))
policies = st.builds(IsolationPolicy, st.booleans(), st.booleans())
profiles = st.sampled_from([None, "", "default", "main", "work"])


@st.composite
def sources(draw: st.DrawFn, chat_id: st.SearchStrategy[str | None] = maybe_ids) -> Source:
    return Source(
        platform=draw(platforms),
        chat_id=draw(chat_id),
        chat_type=draw(chat_types),  # type: ignore[arg-type]
        user_id=draw(maybe_ids),
        user_name=draw(labels),
        thread_id=draw(maybe_ids),
        parent_chat_id=draw(maybe_ids),
        scope_id=draw(maybe_ids),
        chat_name=draw(labels),
        chat_topic=draw(labels),
        user_id_alt=draw(maybe_ids),
    )


@given(
    src=sources(), policy=policies, profile=profiles, user_name=labels, chat_name=labels, chat_topic=labels
)
def test_key_is_deterministic_and_labels_never_change_it(
    src: Source,
    policy: IsolationPolicy,
    profile: str | None,
    user_name: str | None,
    chat_name: str | None,
    chat_topic: str | None,
) -> None:
    key = session_key(src, policy, profile)
    assert session_key(src, policy, profile) == key
    relabelled = replace(src, user_name=user_name, chat_name=chat_name, chat_topic=chat_topic)
    assert session_key(relabelled, policy, profile) == key
    assert session_key(canonical_source(relabelled), policy, profile) == key


@given(src=sources(), policy=policies, profile=profiles)
def test_key_has_no_empty_segments(src: Source, policy: IsolationPolicy, profile: str | None) -> None:
    key = session_key(src, policy, profile)
    assert "::" not in key
    assert not key.endswith(":")
    assert key.startswith(key_namespace(profile) + f":{src.platform}:{src.chat_type}")


@given(a=sources(chat_id=ids), b=sources(chat_id=ids), policy=policies, profile=profiles)
def test_distinct_chat_ids_never_collide_for_the_same_platform_and_type(
    a: Source, b: Source, policy: IsolationPolicy, profile: str | None
) -> None:
    # Same platform/type/scope; everything else (user, thread, alt id) may differ.
    b = replace(b, platform=a.platform, chat_type=a.chat_type, scope_id=a.scope_id)
    if a.chat_id == b.chat_id:
        b = replace(b, chat_id=a.chat_id + "x")  # type: ignore[operator]
    assert session_key(a, policy, profile) != session_key(b, policy, profile)


@given(
    src=sources(),
    policy=policies,
    pad_left=st.sampled_from(["", " ", "\t", "  \n"]),
    pad_right=st.sampled_from(["", " ", "\n", " \t "]),
)
def test_whitespace_padding_on_ids_never_changes_the_canonical_key(
    src: Source, policy: IsolationPolicy, pad_left: str, pad_right: str
) -> None:
    def pad(value: str | None) -> str | None:
        return None if value is None else f"{pad_left}{value}{pad_right}"

    padded = replace(
        src,
        chat_id=pad(src.chat_id),
        user_id=pad(src.user_id),
        thread_id=pad(src.thread_id),
        scope_id=pad(src.scope_id),
        user_id_alt=pad(src.user_id_alt),
    )
    assert session_key(canonical_source(padded), policy) == session_key(canonical_source(src), policy)
