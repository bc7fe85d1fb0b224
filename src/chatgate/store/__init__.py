"""Durable state: the Store protocol and its backends."""
