"""Email: a mailbox over IMAP (IDLE) and SMTP; each thread is a session (docs/platforms/email.md)."""
