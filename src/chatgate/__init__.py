"""chatgate: a durable chat gateway for AI agents."""

__version__ = "0.1.0"
