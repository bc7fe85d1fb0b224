"""Discord's wire shapes, decoded once for every lane that carries them.

The relay lane (a connector forwards the raw interaction body) and the native Discord
adapter (the gateway's INTERACTION_CREATE) decode interactions with this one module, so
an interaction keys, names and flattens the same whichever way it came. It imports only
the domain (a contract in pyproject.toml), so both platforms may import it without
knowing each other.
"""
