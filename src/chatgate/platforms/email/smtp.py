"""Handing one reply to the SMTP server (aiosmtplib), and what its answer means for the outbox.

One connection per message: connect, EHLO, STARTTLS or TLS, AUTH, the transaction, QUIT.
Email's volume does not need a pool, and a fresh connection never carries a half-failed
transaction into the next reply. What each failure means:

- 250 after the data: ``Delivered``;
- the connection, TLS or AUTH failed: ``RetryLater`` (nothing was handed over);
- a 5xx for the sender, a recipient or the data: ``Rejected`` (it never will be);
- a 4xx: ``RetryLater``;
- the connection broke or timed out during the transaction: ``Ambiguous`` (the server may
  have accepted it; the resend looks in the mailbox first, see ``outbound``).
"""

from __future__ import annotations

from email.message import EmailMessage

import msgspec

from chatgate.domain.outbound import Ambiguous, Delivered, DeliveryResult, Rejected, RetryLater
from chatgate.platforms.email.imap import TlsHolder

TIMEOUT = 30.0


class SmtpSettings(msgspec.Struct, frozen=True):
    host: str
    port: int
    security: str
    """``tls``, ``starttls`` or ``none``."""
    user: str
    password: str
    helo_name: str
    """Said in EHLO (set, so the client never asks DNS for this host's name on the event loop)."""
    tls: TlsHolder


async def send(
    settings: SmtpSettings, message: EmailMessage, sender: str, recipients: list[str]
) -> DeliveryResult:
    import aiosmtplib  # the email extra, loaded at the first send

    smtp = aiosmtplib.SMTP(
        hostname=settings.host,
        port=settings.port,
        use_tls=settings.security == "tls",
        start_tls=settings.security == "starttls",
        timeout=TIMEOUT,
        local_hostname=settings.helo_name,
        tls_context=settings.tls.get() if settings.security != "none" else None,
    )
    try:
        await smtp.connect()
        if settings.user:
            await smtp.login(settings.user, settings.password)
    except aiosmtplib.SMTPAuthenticationError as exc:
        return RetryLater(f"the SMTP server refused the login of {settings.user}: {exc.code}", 60.0)
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
        return RetryLater(f"could not reach the SMTP server: {type(exc).__name__}: {exc}", 10.0)
    try:
        await smtp.send_message(message, sender=sender, recipients=recipients)
    except aiosmtplib.SMTPRecipientsRefused as exc:
        codes = [r.code for r in exc.recipients]
        reason = f"the SMTP server refused the recipient(s): {[str(r) for r in exc.recipients][:3]}"
        return Rejected(reason) if all(c >= 500 for c in codes) else RetryLater(reason, 30.0)
    except aiosmtplib.SMTPResponseException as exc:
        reason = f"the SMTP server answered {exc.code} {exc.message}"
        return Rejected(reason) if exc.code >= 500 else RetryLater(reason, 30.0)
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
        return Ambiguous(f"the SMTP transaction broke off: {type(exc).__name__}: {exc}")
    finally:
        try:
            if smtp.is_connected:
                await smtp.quit()
        except (aiosmtplib.SMTPException, OSError, TimeoutError):
            smtp.close()
    return Delivered(str(message["Message-ID"]).strip("<>"))
