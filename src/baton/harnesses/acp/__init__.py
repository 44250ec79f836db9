"""The ACP harness: coding agents that speak the Agent Client Protocol on stdio, each held by a
pane host in a tmux pane (``docs/acp-harness.md``)."""

from __future__ import annotations

from baton.harnesses.acp.harness import CAPABILITIES, AcpHarness
from baton.harnesses.acp.options import AcpAttachment, AcpOptions
from baton.harnesses.acp.session import AcpAgentSession

__all__ = ["CAPABILITIES", "AcpAgentSession", "AcpAttachment", "AcpHarness", "AcpOptions"]
