"""What one turn's agent is doing and what it asks, as the session's events.

:class:`TurnSignals` is the one place a turn's state and prompts are decided. It emits:

- ``StateSeen(turn_id, state, basis)`` when the state changes (``working``, ``needs_input``,
  ``idle``), saying what the state rests on;
- ``PromptRaised`` when the agent starts asking (a dialog is drawn), with the dialog read into a
  ``kind="dialog"`` :class:`~baton.session.prompts.PromptRequest` (its question, the options the
  adapter could read, how to answer), and ``PromptResolved`` exactly once for each, when the
  dialog goes away: ``by`` the caller whose answer was taken, ``interrupt`` if its turn was
  interrupted, ``agent`` if the agent moved on by itself, ``turn_end`` if the turn ended with the
  dialog still drawn (always before that turn's ``TurnEnded``).

Two feeds reach it. The screen (:meth:`screen`, every observation the turn's watch loop makes):
a dialog counts the moment it is drawn, since a caller is waiting on it; a TUI redraws a dialog or
a spinner in steps, so any other state counts once it held for :data:`STATE_HOLD_S`, and a caller
does not see ``needs_input`` → ``idle`` → ``needs_input`` in 0.3 s. The agent's own reports
(W3-B): a reader of its hooks, notifications or session file calls :meth:`seen` with
``basis="agent_report"`` and the :class:`PromptRequest` the report carries (its question and
options, made by :func:`~baton.harnesses.tmux.adapters.dialogs.prompt_request`). Both go
through :meth:`seen`, so every state and prompt has one shape and one rule; how a report and the
screen are weighed when they disagree is for the reports' wiring to decide (today only the
screen feeds it).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from baton.harnesses.tmux.adapters.base import Screen, ScreenState
from baton.harnesses.tmux.monitor import Observation
from baton.session.events import PromptRaised, PromptResolved, StateBasis, StateSeen
from baton.session.prompts import PromptRequest, ResolvedBy
from baton.session.protocol import Emit

#: How long a screen state must hold before it is reported (s).
STATE_HOLD_S = 0.15


@dataclass(frozen=True, slots=True)
class Raised:
    """The prompt a turn is asking now: its id (minted here, unique within the session), what
    was shown to the caller, and when it was raised (monotonic s)."""

    request_id: str
    request: PromptRequest
    at: float


class TurnSignals:
    """The state and prompts of turn ``turn_id`` (see the module docstring).

    ``read_dialog(screen)`` reads the dialog drawn on a screen into the request shown to a
    caller (the adapter's reading, redacted).
    """

    def __init__(
        self, turn_id: str, emit: Emit, read_dialog: Callable[[Screen], PromptRequest]
    ) -> None:
        self.turn_id = turn_id
        self._emit = emit
        self._read_dialog = read_dialog
        #: The state last reported (None before the first).
        self.reported: ScreenState | None = None
        self.basis: StateBasis | None = None
        self.raised: Raised | None = None
        #: The turn was interrupted (a dialog that goes away then was dismissed by it).
        self.interrupted = False
        #: Who is answering the raised prompt right now (a dialog that goes away meanwhile was
        #: answered by them, not left by the agent on its own).
        self.answering: ResolvedBy | None = None
        self._candidate: tuple[ScreenState, float] | None = None

    # -- the feeds -------------------------------------------------------------------------------

    def screen(self, observation: Observation, now: float) -> None:
        """One observation of the screen at ``now`` (monotonic s). A dialog counts as soon as it
        is drawn (a caller waits on it); any other state once it held for
        :data:`STATE_HOLD_S`, so a dialog redrawn in steps is not left and asked again."""
        state = observation.state
        if state is None or state == self.reported:
            self._candidate = None
            return
        if self._candidate is None or self._candidate[0] != state:
            self._candidate = (state, now)
        if state == "needs_input" or now - self._candidate[1] >= STATE_HOLD_S:
            self._candidate = None
            self.seen(state, "screen", screen=observation.screen)

    def seen(
        self,
        state: ScreenState,
        basis: StateBasis,
        *,
        screen: Screen | None = None,
        request: PromptRequest | None = None,
    ) -> None:
        """The agent is in ``state``, as ``basis`` shows. Entering ``needs_input`` raises the
        prompt (``request``, else the dialog read from ``screen``); leaving it resolves the one
        raised. No change, no event."""
        if state == self.reported:
            return
        before, self.reported, self.basis = self.reported, state, basis
        if before == "needs_input" and state != "needs_input":
            self.resolve(self._left_by())
        self._emit(StateSeen(turn_id=self.turn_id, state=state, basis=basis))
        if state == "needs_input":
            if request is None:
                request = self._read_dialog(screen if screen is not None else Screen(()))
            self.ask(request)

    def ended_in(self, observation: Observation) -> None:
        """The state the turn ended in, reported even if it did not hold long enough yet (a
        dialog drawn at the very end raises no prompt: its turn is over)."""
        state = observation.state
        if state is not None and state != self.reported:
            self.reported, self.basis = state, "screen"
            self._emit(StateSeen(turn_id=self.turn_id, state=state, basis="screen"))

    def adopt(self, state: ScreenState, screen: Screen) -> PromptRaised | None:
        """Start from ``state`` as a re-adopted pane shows it (``screen``), without an event:
        the session's ``Opened`` carries it. On ``needs_input`` the dialog drawn is raised now
        and returned, for ``Opened.pending``."""
        self.reported, self.basis = state, "screen"
        if state != "needs_input":
            return None
        request = self._read_dialog(screen)
        raised = Raised(request_id=str(uuid.uuid4()), request=request, at=time.monotonic())
        self.raised = raised
        return PromptRaised(turn_id=self.turn_id, request_id=raised.request_id, request=request)

    # -- prompts ---------------------------------------------------------------------------------

    def ask(self, request: PromptRequest) -> Raised:
        """Raise ``request`` (a prompt still raised is resolved first: the agent asks anew)."""
        self.resolve("agent")
        raised = Raised(request_id=str(uuid.uuid4()), request=request, at=time.monotonic())
        self.raised = raised
        self._emit(
            PromptRaised(turn_id=self.turn_id, request_id=raised.request_id, request=request)
        )
        return raised

    def resolve(self, by: ResolvedBy) -> None:
        """The raised prompt stopped pending (nothing if none is)."""
        raised, self.raised = self.raised, None
        if raised is not None:
            self._emit(PromptResolved(turn_id=self.turn_id, request_id=raised.request_id, by=by))

    def answered(self, by: ResolvedBy, *, asks_again: Screen | None = None) -> None:
        """An answer to the raised prompt was taken; with ``asks_again``, the agent drew another
        question at once (the dialog changed), raised as a new prompt."""
        self.resolve(by)
        if asks_again is not None:
            self.ask(self._read_dialog(asks_again))

    def finish(self) -> None:
        """The turn is ending: a prompt still raised is resolved (``turn_end``) before its
        ``TurnEnded``."""
        self.resolve(self.answering or ("interrupt" if self.interrupted else "turn_end"))

    def _left_by(self) -> ResolvedBy:
        if self.answering is not None:
            return self.answering
        return "interrupt" if self.interrupted else "agent"
