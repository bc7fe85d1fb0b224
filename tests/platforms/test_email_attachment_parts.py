"""An attachment's section, as the parser numbered it when the mail arrived, finds the same
part's bytes when the fetch step reads the mail again; a reference elsewhere is refused."""

from __future__ import annotations

from email.message import EmailMessage

from chatgate.platforms.email.attachments import parse_ref
from chatgate.platforms.email.parse import Mail, parse_mail, part_bytes


def _mail() -> bytes:
    inner = EmailMessage()
    inner["Subject"] = "forwarded"
    inner.set_content("the forwarded text")
    inner.add_attachment(b"nested bytes", maintype="application", subtype="octet-stream", filename="n.bin")
    msg = EmailMessage()
    msg["From"] = "ann@example.test"
    msg["To"] = "bot@example.test"
    msg["Message-ID"] = "<p1@example.test>"
    msg.set_content("hello")
    msg.add_alternative("<p>hello</p>", subtype="html")
    msg.add_attachment(b"\x00\x01binary", maintype="application", subtype="octet-stream", filename="a.bin")
    msg.add_attachment(inner)
    return msg.as_bytes()


def test_every_attachment_the_parser_keeps_is_found_again_by_its_section() -> None:
    raw = _mail()
    mail = parse_mail(raw)
    assert isinstance(mail, Mail)
    found = {p.name: part_bytes(raw, p.index) for p in mail.attachments}
    assert found["a.bin"] == b"\x00\x01binary"
    assert found["n.bin"] == b"nested bytes"


def test_a_section_that_is_not_there_is_none() -> None:
    raw = _mail()
    assert part_bytes(raw, "9") is None
    assert part_bytes(raw, "1.9.2") is None
    assert part_bytes(raw, "x") is None


def test_a_reference_is_parsed_back_to_its_mail_and_section() -> None:
    ref = parse_ref("imap://bot@127.0.0.1/INBOX;UIDVALIDITY=17/;UID=4/;SECTION=1.2")
    assert ref is not None
    assert (ref.base, ref.uidvalidity, ref.uid, ref.section) == ("imap://bot@127.0.0.1/INBOX", 17, 4, "1.2")
    assert parse_ref("https://example.test/a.png") is None
