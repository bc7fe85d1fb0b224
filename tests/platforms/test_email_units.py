"""The email adapter's pure parts: what the agent reads, what is never answered, threads and ids,
the loop guard, the allowlist by domain, the section and the sending budget."""

from __future__ import annotations

from email.message import EmailMessage

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatgate.domain.source import Source
from chatgate.engine.authz import Authorizer
from chatgate.platforms.email.compose import Parent, compose, reply_subject
from chatgate.platforms.email.decode import Where, decode_mail
from chatgate.platforms.email.outbound import LoopGuard
from chatgate.platforms.email.parse import Mail, parse_mail
from chatgate.platforms.email.plugin import PLUGIN
from chatgate.platforms.email.section import EmailSection
from chatgate.platforms.email.text import html_to_text, what_they_wrote
from chatgate.platforms.email.threads import chat_of_root, our_chat, reply_message_id, thread_chat
from chatgate.platforms.kit.conform import Invalid, conform
from chatgate.platforms.kit.plugin import CoreView
from chatgate.platforms.kit.skipped import Skipped

WHERE = Where("bot@example.test", "imap://bot@h/INBOX", 7, 42, "example.test")


def raw(headers: dict[str, str], text: str = "hello") -> bytes:
    msg = EmailMessage()
    msg["From"] = "Ann <ann@example.test>"
    msg["To"] = "bot@example.test"
    msg["Subject"] = "Hi"
    msg["Message-ID"] = "<m1@ann.test>"
    for name, value in headers.items():
        del msg[name]
        msg[name] = value
    msg.set_content(text)
    return msg.as_bytes()


# ------------------------------------------------------------ what the agent reads


def test_quoted_history_and_signature_are_not_what_they_wrote() -> None:
    gmail = "Yes, ten.\n\nOn Fri, 4 Dec 2026 at 10:00, Bot <b@x> wrote:\n> old text\n> more\n"
    assert what_they_wrote(gmail) == "Yes, ten."
    outlook = "Fine by me.\n\nFrom: Bot <b@x>\nSent: Friday\nTo: Ann\nSubject: Re\n\nold text\n"
    assert what_they_wrote(outlook) == "Fine by me."
    assert what_they_wrote("Thanks!\n-- \nAnn\nExample Ltd\n") == "Thanks!"
    assert what_they_wrote("Top\n> quoted line\nBottom\n\nSent from my iPhone\n") == "Top\nBottom"
    assert what_they_wrote("> only quoted\n> text\n") == ""


def test_html_becomes_text_without_scripts_styles_or_quoted_blocks() -> None:
    html = (
        "<html><head><style>p{}</style></head><body><p>Hello <b>there</b> &amp; welcome</p>"
        "<script>alert(1)</script><div>second<br>line</div><blockquote>quoted</blockquote></body></html>"
    )
    assert html_to_text(html) == "Hello there & welcome\n\nsecond\nline"


def test_an_html_only_mail_reaches_the_agent_as_text() -> None:
    msg = EmailMessage()
    msg["From"], msg["Message-ID"] = "ann@example.test", "<h1@ann.test>"
    msg.set_content("<p>Is it <i>on</i>?</p>", subtype="html")
    mail = parse_mail(msg.as_bytes())
    assert isinstance(mail, Mail) and mail.text == "Is it on?"


@pytest.mark.parametrize(
    "headers",
    [
        {"Auto-Submitted": "auto-replied"},
        {"Auto-Submitted": "auto-generated"},
        {"Precedence": "bulk"},
        {"Precedence": "list"},
        {"List-Id": "<news.example.test>"},
        {"List-Unsubscribe": "<mailto:u@x>"},
        {"Return-Path": "<>"},
        {"X-Autoreply": "yes"},
        {"From": "MAILER-DAEMON@example.test"},
        {"From": "no-reply@example.test"},
    ],
)
def test_machines_lists_and_bounces_are_skipped(headers: dict[str, str]) -> None:
    event = decode_mail(parse_mail(raw(headers)), WHERE, 0.0)
    assert isinstance(event, Skipped) and "never answered" in event.reason


def test_a_person_is_an_inbound_in_the_thread_with_attachments_as_references() -> None:
    msg = EmailMessage()
    msg["From"], msg["Message-ID"], msg["Subject"] = "Ann <Ann@Example.test>", "<m2@ann.test>", "Report"
    msg["References"] = "<root@ann.test> <m1@ann.test>"
    msg.set_content("see attached")
    msg.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="r.pdf")
    event = decode_mail(parse_mail(msg.as_bytes()), WHERE, 5.0)
    assert not isinstance(event, Skipped) and event.__class__.__name__ == "Inbound"
    assert event.delivery_id == "bot@example.test:m2@ann.test"  # type: ignore[union-attr]
    assert event.source == Source(  # type: ignore[union-attr]
        platform="email",
        chat_id=chat_of_root("root@ann.test"),
        chat_type="dm",
        user_id="ann@example.test",
        user_name="Ann",
        chat_name="Report",
    )
    (attachment,) = event.attachments  # type: ignore[union-attr]
    assert attachment.name == "r.pdf" and attachment.mime == "application/pdf" and attachment.size == 8
    assert attachment.ref == "imap://bot@h/INBOX;UIDVALIDITY=7/;UID=42/;SECTION=2"


def test_bounds_on_depth_and_attachments() -> None:
    msg = EmailMessage()
    msg["From"], msg["Message-ID"] = "ann@example.test", "<b@ann.test>"
    msg.set_content("many files")
    for n in range(5):
        msg.add_attachment(b"x", maintype="application", subtype="octet-stream", filename=f"{n}.bin")
    mail = parse_mail(msg.as_bytes(), max_attachments=3)
    assert isinstance(mail, Mail) and len(mail.attachments) == 3 and mail.problems
    nested = EmailMessage()
    nested.set_content("deep inside")
    for _ in range(12):
        outer = EmailMessage()
        outer.make_mixed()
        outer.attach(nested)
        nested = outer
    nested["From"], nested["Message-ID"] = "ann@example.test", "<d@ann.test>"
    deep = parse_mail(nested.as_bytes(), max_depth=4)
    assert isinstance(deep, Mail) and deep.text == "" and any("deeper" in p for p in deep.problems)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000))
def test_parsing_never_raises(data: bytes) -> None:
    mail = parse_mail(b"From: a@b.c\r\nMessage-ID: <x@y>\r\n" + data)
    decode_mail(mail, WHERE, 0.0)


# ------------------------------------------------------------ threads and ids


def test_a_thread_is_its_root_or_one_of_our_message_ids() -> None:
    root = chat_of_root("root@ann.test")
    assert thread_chat("m3@ann.test", ["m2@ann.test"], ["root@ann.test", "m2@ann.test"], "x.test") == root
    assert thread_chat("m1@ann.test", [], [], "x.test") == chat_of_root("m1@ann.test")
    ours = reply_message_id("salt", "final:7", root, "x.test")
    assert our_chat(ours, "x.test") == root and our_chat(ours, "other.test") is None
    # a client that sends only In-Reply-To, naming our reply: still the same thread
    assert thread_chat("m4@ann.test", [ours], [], "x.test") == root


def test_a_rows_message_id_is_stable_and_depends_on_the_salt() -> None:
    chat = chat_of_root("r@x")
    assert reply_message_id("s1", "final:1", chat, "d") == reply_message_id("s1", "final:1", chat, "d")
    assert reply_message_id("s1", "final:1", chat, "d") != reply_message_id("s2", "final:1", chat, "d")
    assert reply_message_id("s1", "final:1", chat, "d") != reply_message_id("s1", "final:2", chat, "d")


def test_a_reply_is_threaded_and_quotes_nothing() -> None:
    parent = Parent("m2@ann.test", "RE: Re: Plans", ("root@ann.test", "m1@ann.test"))
    msg = compose(
        sender="bot@x.test", display_name="Agent", to="ann@ann.test", message_id="cg.1@x.test",
        text="the answer", in_reply_to="m2@ann.test", parent=parent,
    )  # fmt: skip
    assert msg["Subject"] == "Re: Plans"
    assert msg["In-Reply-To"] == "<m2@ann.test>"
    assert msg["References"] == "<root@ann.test> <m1@ann.test> <m2@ann.test>"
    assert msg["Auto-Submitted"] == "auto-replied"
    assert msg.get_content().strip() == "the answer"
    assert reply_subject("") == "Re: your message"


def test_the_loop_guard_bounds_replies_per_thread_per_hour() -> None:
    now = [0.0]
    guard = LoopGuard(3, clock=lambda: now[0])
    for _ in range(3):
        assert guard.allows("t1")
        guard.record("t1")
    assert not guard.allows("t1") and guard.allows("t2")
    now[0] = 3601.0
    assert guard.allows("t1")


# ------------------------------------------------------------ config and access


def _section(**values: object) -> EmailSection:
    base: dict[str, object] = {
        "enabled": True, "address": "Bot@Example.test", "imap_host": "imap.x", "smtp_host": "smtp.x",
        "password_env": "EMAIL_PASSWORD",
    }  # fmt: skip
    return conform(EmailSection, {**base, **values})


def test_the_section_requires_its_servers_and_reads_addresses_and_domains() -> None:
    with pytest.raises(Invalid):
        conform(EmailSection, {"enabled": True, "address": "bot@x.test"})
    with pytest.raises(Invalid):
        _section(allow_from=["not-an-address"])
    section = _section(allow_from=["Ann@Example.test", "@friends.test"], sends_per_minute=30)
    assert section.address == "bot@example.test" and section.domain == "example.test"
    access = PLUGIN.access(section, CoreView())["email"]
    assert access.allow_users == {"ann@example.test"} and access.allow_suffixes == {"@friends.test"}
    authz = Authorizer({"email": access})
    allowed = [
        u
        for u in ("ann@example.test", "bob@friends.test", "eve@evilfriends.test", "eve@x.test")
        if authz.check(Source(platform="email", chat_id="t1", user_id=u)) is None
    ]
    assert allowed == ["ann@example.test", "bob@friends.test"]


def test_the_sending_budget_is_the_platform_rate() -> None:
    from chatgate.platforms.email.adapter import EmailAdapter

    adapter = EmailAdapter(_section(sends_per_minute=30), "pw", "pw", None, None)  # type: ignore[arg-type]
    assert adapter.capabilities.platform_max_rate == 0.5
    assert not adapter.capabilities.edit and not adapter.capabilities.drafts
