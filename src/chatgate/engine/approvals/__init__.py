"""Human approval of dangerous tool calls.

- ``broker``: ``ApprovalBroker`` asks (records the approval, shows the prompt), waits
  for the answer or the timeout, and renders the recorded outcome.
- ``answers``: ``AnswerIntake``, the answers that arrive at admission (a prompt's
  button, ``/approve``, ``/deny``), committed with their event.
- ``policy``: ``ApprovalSettings``, who may answer, and what each recorded outcome says.
- ``tools``: ``ShellTools``, the shell tool with the broker in front of it.
"""

from chatgate.engine.approvals.answers import AnswerIntake, prompt_response
from chatgate.engine.approvals.broker import ApprovalBroker
from chatgate.engine.approvals.policy import Answerer, AnswerRefused, ApprovalSettings, Decision, ToolContext
from chatgate.engine.approvals.tools import ApprovingShellRunner, ShellTools

__all__ = [
    "AnswerIntake",
    "AnswerRefused",
    "Answerer",
    "ApprovalBroker",
    "ApprovalSettings",
    "ApprovingShellRunner",
    "Decision",
    "ShellTools",
    "ToolContext",
    "prompt_response",
]
