"""``chatgate init``'s live check of a mailbox: an IMAP login and an SMTP EHLO and AUTH.

The wizard has no event loop, so this is the standard library's blocking ``imaplib`` and
``smtplib`` (and needs no extra installed yet). The password is sent only to the servers
the answers name and never appears in a message.
"""

from __future__ import annotations

import contextlib
import imaplib
import smtplib
import ssl

from chatgate.platforms.email.section import EmailSection
from chatgate.platforms.kit.init import TIMEOUT_SECONDS, CheckFailed

PROVIDERS: dict[str, tuple[str, str]] = {
    "gmail.com": ("imap.gmail.com", "smtp.gmail.com"),
    "googlemail.com": ("imap.gmail.com", "smtp.gmail.com"),
    "outlook.com": ("outlook.office365.com", "smtp.office365.com"),
    "hotmail.com": ("outlook.office365.com", "smtp.office365.com"),
    "fastmail.com": ("imap.fastmail.com", "smtp.fastmail.com"),
    "icloud.com": ("imap.mail.me.com", "smtp.mail.me.com"),
}
"""IMAP and SMTP servers of common providers, the wizard's defaults for their addresses."""


def _clean(text: object, password: str) -> str:
    return str(text).replace(password, "<secret>") if password else str(text)


def check_mailbox(section: EmailSection, password: str) -> str:
    """Log in over IMAP (and read the mailbox's UIDVALIDITY), then EHLO and AUTH over SMTP."""
    context = ssl.create_default_context()
    try:
        if section.imap_security == "tls":
            imap: imaplib.IMAP4 = imaplib.IMAP4_SSL(
                section.imap_host, section.imap_port, ssl_context=context, timeout=TIMEOUT_SECONDS
            )
        else:
            imap = imaplib.IMAP4(section.imap_host, section.imap_port, timeout=TIMEOUT_SECONDS)
        try:
            imap.login(section.login, password)
            status, _ = imap.select(f'"{section.mailbox}"', readonly=True)
            if status != "OK":
                raise CheckFailed(f"the IMAP server has no folder {section.mailbox!r}")
            idle = "IDLE" in imap.capabilities
        finally:
            with contextlib.suppress(imaplib.IMAP4.error, OSError):
                imap.logout()
    except imaplib.IMAP4.error as exc:
        raise CheckFailed(
            f"the IMAP server refused the login of {section.login}: {_clean(exc, password)}"
        ) from None
    except OSError as exc:
        raise CheckFailed(f"could not reach {section.imap_host}:{section.imap_port}: {exc}") from None
    user = section.smtp_user or section.login
    try:
        smtp: smtplib.SMTP
        if section.smtp_security == "tls":
            smtp = smtplib.SMTP_SSL(
                section.smtp_host, section.smtp_port, timeout=TIMEOUT_SECONDS, context=context
            )
        else:
            smtp = smtplib.SMTP(section.smtp_host, section.smtp_port, timeout=TIMEOUT_SECONDS)
        try:
            smtp.ehlo(section.domain)
            if section.smtp_security == "starttls":
                smtp.starttls(context=context)
                smtp.ehlo(section.domain)
            smtp.login(user, password)
        finally:
            try:
                smtp.quit()
            except (smtplib.SMTPException, OSError):
                smtp.close()
    except smtplib.SMTPAuthenticationError as exc:
        raise CheckFailed(f"the SMTP server refused the login of {user} ({exc.smtp_code})") from None
    except (smtplib.SMTPException, OSError) as exc:
        raise CheckFailed(
            f"SMTP at {section.smtp_host}:{section.smtp_port}: {_clean(exc, password)}"
        ) from None
    how = "IDLE" if idle else "polling (the server has no IDLE)"
    return (
        f"{section.login} logs in on {section.imap_host} ({how}) and {section.smtp_host} accepts it to send"
    )
