"""The OpenAI-compatible API: one more lane into the durable pipeline (docs/api.md)."""
