"""Configuration: one YAML file plus ``CHATGATE_*`` environment overrides.

Validated with pydantic at start-up so a mistake is reported with the offending
key before anything connects. Secrets are never in the YAML: the file names the
environment variable that holds each one.
"""

from chatgate.app.config.loader import check_budgets, load_config
from chatgate.app.config.model import ConfigError, GatewayConfig, secret

__all__ = ["ConfigError", "GatewayConfig", "check_budgets", "load_config", "secret"]
