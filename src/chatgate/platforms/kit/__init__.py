"""What every adapter is built from: per-key intake queues (ordered per chat, concurrent across chats)."""
