"""Platform adapters: one package per platform."""
