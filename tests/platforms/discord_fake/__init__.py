"""A fake Discord (gateway v10 and REST) that the unmodified discord.py talks to, for tests."""

from discord_fake.server import FakeDiscord
from discord_fake.state import APP_ID, BOT_ID, TOKEN, TOKEN_ENV, Channel, Guild, Message, User, snowflake

__all__ = [
    "APP_ID",
    "BOT_ID",
    "TOKEN",
    "TOKEN_ENV",
    "Channel",
    "FakeDiscord",
    "Guild",
    "Message",
    "User",
    "snowflake",
]
