"""The built-in web chat: one page and a WebSocket at ``/ws``."""
