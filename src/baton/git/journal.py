"""The step journal of one finalization: intent before each side effect, result after it.

Rules (``../shared/reference/worktree-safety.md`` §3.5):
- a step is recorded ``started`` (with its intent, e.g. a stash nonce) *before* its side effect,
  and ``done`` (with its result, e.g. the stash id) only *after* it;
- a retry skips ``done`` steps and re-runs ``started`` or ``failed`` ones with the recorded
  intent. Every step function first looks at the repository to see whether its side effect
  already happened (a stash found by its nonce, a ref already at the merge commit, a worktree
  already gone), so a destructive action is never repeated blindly;
- each change is persisted at once (one store transaction), so a crash loses at most the
  knowledge that the current step finished, which the next run rediscovers from git.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from baton.git.errors import error_json
from baton.git.records import utc_now

StepState = Literal["started", "done", "failed"]
Phase = Literal["before", "after"]

#: Called with (step, phase): ``before`` right after the intent is persisted, ``after`` right
#: after the side effect and before ``done`` is persisted. Tests use it to crash the process at
#: exactly those points; production code passes None.
StepHook = Callable[[str, Phase], None]

Persist = Callable[[tuple["JournalEntry", ...]], None]


@dataclass(frozen=True)
class JournalEntry:
    """One step's record.

    ``data`` holds the intent (at ``started``) merged with the result (at ``done``); it is
    JSON-able. ``attempts`` counts how many times the step was started.
    """

    step: str
    state: StepState
    attempts: int
    started_at: str
    finished_at: str | None = None
    data: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """``{step, state, attempts, startedAt, finishedAt?, data, error?}``."""
        body: dict[str, Any] = {
            "step": self.step,
            "state": self.state,
            "attempts": self.attempts,
            "startedAt": self.started_at,
            "data": dict(self.data or {}),
        }
        if self.finished_at is not None:
            body["finishedAt"] = self.finished_at
        if self.error is not None:
            body["error"] = dict(self.error)
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> JournalEntry:
        return cls(
            step=body["step"],
            state=body["state"],
            attempts=int(body.get("attempts", 1)),
            started_at=body["startedAt"],
            finished_at=body.get("finishedAt"),
            data=dict(body.get("data") or {}),
            error=body.get("error"),
        )


class Journal:
    """Ordered step records of one finalization, persisted after every change.

    Parameters
    ----------
    entries:
        What was recorded so far (empty for a new finalization).
    persist:
        Called with all entries after each change; must be durable when it returns. None
        keeps the journal in memory (a one-shot operation without a store).
    hook:
        See :data:`StepHook`.
    """

    def __init__(
        self,
        entries: Sequence[JournalEntry] = (),
        persist: Persist | None = None,
        hook: StepHook | None = None,
    ) -> None:
        self._entries: list[JournalEntry] = list(entries)
        self._persist = persist
        self._hook = hook

    @property
    def entries(self) -> tuple[JournalEntry, ...]:
        return tuple(self._entries)

    def get(self, step: str) -> JournalEntry | None:
        for entry in self._entries:
            if entry.step == step:
                return entry
        return None

    def is_done(self, step: str) -> bool:
        entry = self.get(step)
        return entry is not None and entry.state == "done"

    def data(self, step: str) -> dict[str, Any]:
        """The recorded data of a step (``{}`` if it never started)."""
        entry = self.get(step)
        return dict(entry.data or {}) if entry is not None else {}

    def record(self, entry: JournalEntry) -> None:
        """Insert or replace the entry of ``entry.step`` and persist."""
        for index, existing in enumerate(self._entries):
            if existing.step == entry.step:
                self._entries[index] = entry
                break
        else:
            self._entries.append(entry)
        if self._persist is not None:
            self._persist(self.entries)

    def run(
        self,
        step: str,
        action: Callable[[dict[str, Any]], Mapping[str, Any]],
        *,
        intent: Callable[[], Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Run ``step`` once: skip it if done, else record intent, act, record the result.

        Parameters
        ----------
        action:
            Receives the step's data (recorded intent, plus anything an earlier attempt
            recorded) and returns its result data. It must check whether its side effect
            already happened before acting.
        intent:
            Produces the intent on the first attempt only; later attempts reuse the recorded
            one (a stash nonce stays the same across retries).

        Returns
        -------
        dict
            The step's data after it is done.

        Raises
        ------
        Exception
            Whatever ``action`` raised, after recording the step ``failed`` with its JSON.
        """
        previous = self.get(step)
        if previous is not None and previous.state == "done":
            return dict(previous.data or {})
        data: dict[str, Any] = dict(intent()) if intent is not None else {}
        attempts = 1
        if previous is not None:
            data.update(previous.data or {})
            attempts = previous.attempts + 1
        started = JournalEntry(step, "started", attempts, utc_now(), data=dict(data))
        self.record(started)
        if self._hook is not None:
            self._hook(step, "before")
        try:
            result = action(dict(data))
        except Exception as exc:
            self.record(
                replace(started, state="failed", finished_at=utc_now(), error=error_json(exc, step))
            )
            raise
        if self._hook is not None:
            self._hook(step, "after")
        data.update(result)
        self.record(replace(started, state="done", finished_at=utc_now(), data=data))
        return data
