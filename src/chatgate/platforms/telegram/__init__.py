"""The native Telegram adapter (the Bot API over a thin httpx client, long polling with durable offsets)."""
