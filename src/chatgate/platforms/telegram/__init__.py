"""The native Telegram adapter (Bot API over aiogram, long polling with durable offsets)."""
