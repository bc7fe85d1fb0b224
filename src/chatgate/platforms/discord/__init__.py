"""The native Discord adapter on discord.py (issue 14); see docs/platforms/discord.md."""
