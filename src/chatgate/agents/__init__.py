"""Agents: the Agent protocol and its built-in implementations."""
