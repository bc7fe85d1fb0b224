"""The asyncio engine: admission, scheduling, turns, delivery."""
