"""The relay lane: platform events forwarded by a Hermes relay connector (contract v1)."""
