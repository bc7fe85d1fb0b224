"""The native Telegram adapter (the Bot API over a thin aiohttp client, long polling with durable offsets)."""
