"""Composition root: config, CLI, HTTP surfaces, wiring."""
