"""Who may do what on one Spawnea connection (``spawnea-control-api.md``, "Transport and
authorization boundary" and "Connection lifecycle"; ``WAVE2.md`` §8.4).

- A connection with an injected identity (``SPAWNEA_SESSION_ID`` = an active local root) is
  scoped to that root and its direct children, and may prompt and read the turns of its direct
  children only: prompting the root would type into the pane running the tool call.
- A connection without one starts in bootstrap mode (``spawnea_get_state`` and
  ``spawnea_create_session`` only) and binds to the root it creates, or exactly replays; it may
  then prompt that root and its direct children. Its origin never changes after binding.
- Every operation checks again that the root is still active.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Origin = Literal["bootstrap", "injected"]


@dataclass
class Scope:
    """The authorization state of one connection."""

    origin: Origin
    root: str | None = None
    """The bound root's session key (None while a bootstrap connection is unbound)."""
    creation: str | None = None
    """The ``clientRequestId`` that bound a bootstrap connection (only its exact replay is
    accepted afterwards)."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """The Agent Context log of this connection (bounded; see the service)."""
    recorded: int = 0
    """Calls recorded in :attr:`calls` so far, grouped ones included: it changes whenever the
    log does (the log itself stops growing at its bound), so the dashboard can tell."""

    @property
    def bound(self) -> bool:
        return self.root is not None

    def may_prompt_root(self) -> bool:
        """Only a bootstrap-origin connection may type into its root's pane."""
        return self.origin == "bootstrap"
