"""An :data:`~baton.session.protocol.Emit` for harness-level tmux tests: it records every event
the session reports, with the moment it came, and checks the seam's event rules.

The rules are the runtime conformance suite's (:func:`tests.conformance.suite.assert_event_rules`):
``Submitted`` only after ``Submitting``, one ``TurnEnded`` per submitted turn and nothing of that
turn after it, JSON-safe activity data, unique prompt request ids.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from baton.session import (
    AgentExited,
    AgentStarted,
    Opened,
    PromptRaised,
    PromptResolved,
    SessionEvent,
    StateSeen,
    TurnEnded,
)
from tests.conformance.suite import Recording, assert_event_rules


@dataclass
class Recorder(Recording):
    """Every event, in order (``events``), and when each came (``times``, monotonic s)."""

    times: list[float] = field(default_factory=list)

    def __call__(self, event: SessionEvent) -> None:
        self.events.append(event)
        self.times.append(time.monotonic())

    def names(self, turn_id: str) -> list[str]:
        """The tags of turn ``turn_id``'s events, in order (``submitting``, ``activity``...)."""
        return [e.event for e in self.of(turn_id)]

    def states(self, turn_id: str) -> list[str]:
        """The states reported for turn ``turn_id`` (``StateSeen``), in order."""
        return [e.state for e in self.of(turn_id) if isinstance(e, StateSeen)]

    def activity(self, turn_id: str, type_: str) -> list[dict[str, object]]:
        """The data of turn ``turn_id``'s activities of ``type_`` (``delivery``, ``interrupt``)."""
        return [
            dict(e.data)
            for e in self.of(turn_id)
            if e.event == "activity" and getattr(e, "type", None) == type_
        ]

    def raised(self, turn_id: str) -> list[PromptRaised]:
        return [e for e in self.of(turn_id) if isinstance(e, PromptRaised)]

    def resolved(self, turn_id: str) -> list[PromptResolved]:
        return [e for e in self.of(turn_id) if isinstance(e, PromptResolved)]

    def ended(self, turn_id: str) -> TurnEnded | None:
        return next((e for e in self.of(turn_id) if isinstance(e, TurnEnded)), None)

    def ended_at(self, turn_id: str) -> float | None:
        """When turn ``turn_id``'s ``TurnEnded`` came (monotonic s)."""
        for event, at in zip(self.events, self.times, strict=True):
            if isinstance(event, TurnEnded) and event.turn_id == turn_id:
                return at
        return None

    def submitted_at(self, turn_id: str) -> float | None:
        for event, at in zip(self.events, self.times, strict=True):
            if event.event == "submitted" and getattr(event, "turn_id", None) == turn_id:
                return at
        return None

    @property
    def opened(self) -> list[Opened]:
        return [e for e in self.events if isinstance(e, Opened)]

    @property
    def exits(self) -> list[AgentExited]:
        return [e for e in self.events if isinstance(e, AgentExited)]

    @property
    def spawned(self) -> list[int]:
        return [e.pid for e in self.events if isinstance(e, AgentStarted)]

    def check(self) -> None:
        """The seam's event rules (module docstring); raises AssertionError naming a broken one."""
        assert_event_rules(self)
