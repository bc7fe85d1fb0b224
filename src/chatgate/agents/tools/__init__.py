"""Tools an agent may call. Dangerous calls are gated by ``chatgate.domain.shell.danger``."""

from chatgate.agents.tools.shell import SHELL_TOOL_SCHEMA, ShellResult, run_shell

__all__ = ["SHELL_TOOL_SCHEMA", "ShellResult", "run_shell"]
