"""Admission: who may hold a workspace tree and a live slot, decided in one place from the
policy's rule value (``docs/architecture.md`` §3.3).

It replaces ``runs._admit`` (and its ``policy is CONTROLLER`` test), droid-mcp's
``check_turn_slot``/``check_writer`` and the engine's ``tree_conflict``/``writer_obstacles``/
``hold_tree``/``claim_tree``/``release_tree``. The rules:

- **Trees** (``controller.md``, "Configuration and security"): every holder holds its canonical
  workspace tree; two holders conflict when one tree contains the other, unless both are
  read-only (``off``) or both hold under :class:`SharedTrees` of one family (Spawnea's
  same-project children, ``WAVE2.md`` decision 7). Writers of other Baton processes count too,
  through the cross-process lock files (:mod:`baton.engine.locks`). There is no queue.
- **Capacity** counts the holders under an equal rule value, never a surface name:
  :class:`TreeLocks` at most ``max_live`` sessions; :class:`RepoSlots` at most ``max_live`` busy
  turns and ``per_repo`` per repository (a ``RepoSlots`` holder holds only while its turn runs:
  the live table releases it at the turn's end); :class:`SharedTrees` has no limit.
- **Cleanups are waited for**: a holder whose turns all ended and whose processes are still
  going away (``cleanup_pending``) is not refused at once; :meth:`Admission.admit` waits for it,
  bounded by the cancel grace plus :data:`CLEANUP_SLACK_S` (issue W2-1, item 2), then checks
  again and refuses.

:meth:`Admission.check` and :meth:`Admission.hold` never ``await``: a caller checks, creates its
session and holds with no ``await`` in between, so concurrent calls on the one loop cannot race.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from baton.engine.locks import ForeignHolder, HeldLock, WorkspaceLocks
from baton.engine.policy import AdmissionRule, RepoSlots, SessionPolicy, SharedTrees, TreeLocks
from baton.engine.runtime.live import LiveSession
from baton.engine.workspaces import TreeLock, find_conflict
from baton.errors import BatonError

#: Beyond the cancel grace, how long an admission waits for a finished holder's processes to go:
#: the agent's exit, the group check and its record (about 0.1 s idle, up to ~1.5 s measured on a
#: loaded 2-core machine).
CLEANUP_SLACK_S = 3.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """What a session asks to hold: its ``workspace`` tree (canonical) at ``autonomy`` (the
    service decides: droid-mcp and Spawnea hold as writers, ``high``), and for
    :class:`RepoSlots` its ``repo`` (the nearest ancestor with ``.git``)."""

    session_key: str
    workspace: str
    autonomy: str
    repo: str | None = None


@dataclass(slots=True)
class Hold:
    """One held claim: under which rule, by which live session (None until it exists)."""

    rule: AdmissionRule
    claim: Claim
    session: LiveSession | None
    lock: HeldLock


def _family(rule: AdmissionRule) -> str | None:
    return rule.family if isinstance(rule, SharedTrees) else None


class Admission:
    """The holds of one engine (see the module docstring).

    ``locks`` gives the cross-process lock directory (created on first use); ``cleanup_wait_s``
    bounds a wait for cleanups (``cancelGraceMs`` / 1000 + :data:`CLEANUP_SLACK_S`).
    """

    def __init__(self, locks: Callable[[], WorkspaceLocks], *, cleanup_wait_s: float) -> None:
        self._locks = locks
        self.cleanup_wait_s = cleanup_wait_s
        self._holds: dict[str, Hold] = {}

    def holds(self) -> list[Hold]:
        return list(self._holds.values())

    def held(self, session_key: str) -> Hold | None:
        return self._holds.get(session_key)

    def check(
        self,
        policy: SessionPolicy,
        claim: Claim,
        *,
        final: bool,
        ignore: LiveSession | None = None,
    ) -> list[LiveSession]:
        """Check ``claim`` under ``policy.concurrency`` (no ``await``).

        Returns the holders whose cleanup is the only obstacle, for the caller to wait on
        (never with ``final``); empty when the claim may be held now. ``ignore`` is the caller's
        own session (a continue of the session that holds the tree).

        Raises
        ------
        BatonError
            ``workspace_busy`` (naming the holder: ``conflictingRunId``, ``conflictingSessionId``
            for a shared-tree holder, ``holderPid`` for another process) or
            ``capacity_exhausted``.
        """
        rule = policy.concurrency
        others = [
            h
            for h in self._holds.values()
            if h.claim.session_key != claim.session_key
            and (ignore is None or h.session is not ignore)
        ]
        cleanups: list[LiveSession] = []
        for hold in others:
            held = TreeLock(
                hold.claim.session_key,
                hold.claim.workspace,
                hold.claim.autonomy,
                _family(hold.rule),
            )
            if find_conflict(claim.workspace, claim.autonomy, [held], _family(rule)) is None:
                continue
            if hold.session is not None and hold.session.cleanup_pending and not final:
                cleanups.append(hold.session)
                continue
            raise _busy(hold)
        foreign = self._locks().foreign_conflict(claim.workspace, claim.autonomy, _family(rule))
        if foreign is not None:
            raise busy_elsewhere(foreign)
        same = [h for h in others if h.rule == rule]
        if isinstance(rule, TreeLocks) and rule.max_live is not None and len(same) >= rule.max_live:
            finishing = [
                h.session for h in same if h.session is not None and h.session.cleanup_pending
            ]
            if final or len(same) - len(finishing) >= rule.max_live:
                raise BatonError(
                    "capacity_exhausted",
                    f"{len(same)} runs are live (maxConcurrentRuns {rule.max_live}); there is "
                    "no queue",
                )
            cleanups += [s for s in finishing if s not in cleanups]
        elif isinstance(rule, RepoSlots):
            _check_slots(rule, claim, same)
        return cleanups

    async def admit(
        self, policy: SessionPolicy, claim: Claim, *, ignore: LiveSession | None = None
    ) -> None:
        """:meth:`check`; if only cleanups are in the way, wait for them (bounded) and check
        once more (``final``). The caller then holds with no ``await`` after this returns.

        Raises
        ------
        BatonError
            As :meth:`check`.
        """
        cleanups = self.check(policy, claim, final=False, ignore=ignore)
        if not cleanups:
            return
        waiting = [asyncio.ensure_future(s.gone.wait()) for s in cleanups if not s.gone.is_set()]
        if waiting:
            _, pending = await asyncio.wait(waiting, timeout=self.cleanup_wait_s)
            for task in pending:
                task.cancel()
        self.check(policy, claim, final=True, ignore=ignore)

    def hold(self, policy: SessionPolicy, claim: Claim, session: LiveSession | None = None) -> None:
        """Hold ``claim`` (and its cross-process lock) for ``session`` (no ``await``; call right
        after :meth:`check` or :meth:`admit`). Holding again under the same key replaces it.

        Raises
        ------
        BatonError
            ``workspace_busy`` if another Baton process took a conflicting lock meanwhile.
        """
        self.release(claim.session_key)
        got = self._locks().acquire(
            claim.session_key, claim.workspace, claim.autonomy, _family(policy.concurrency)
        )
        if isinstance(got, ForeignHolder):
            raise busy_elsewhere(got)
        self._holds[claim.session_key] = Hold(policy.concurrency, claim, session, got)

    def attach(self, session_key: str, session: LiveSession) -> None:
        """Name the live session of a hold taken before it existed."""
        if (hold := self._holds.get(session_key)) is not None:
            hold.session = session

    def release(self, session_key: str) -> None:
        """Drop a session's hold, if it has one."""
        hold = self._holds.pop(session_key, None)
        if hold is not None:
            self._locks().release(hold.lock)


def _check_slots(rule: RepoSlots, claim: Claim, same: list[Hold]) -> None:
    if len(same) >= rule.max_live:
        raise BatonError(
            "capacity_exhausted",
            f"{len(same)} turns are running or waiting on a prompt (at most {rule.max_live}); "
            "wait for one to finish or cancel it",
        )
    in_repo = [h for h in same if h.claim.repo == claim.repo]
    if len(in_repo) >= rule.per_repo:
        holder = in_repo[0].session
        name = (
            holder.agent_session_id
            if holder is not None and holder.agent_session_id
            else in_repo[0].claim.session_key
        )
        raise BatonError(
            "capacity_exhausted",
            f"a turn is already live in repository {claim.repo} (session {name}); one live turn "
            "per repository",
            repo=claim.repo,
        )


def _busy(hold: Hold) -> BatonError:
    claim = hold.claim
    if isinstance(hold.rule, SharedTrees):
        return BatonError(
            "workspace_busy",
            f"workspace tree is in use by session {claim.session_key} ({claim.workspace}), whose "
            "agent writes there; it is released when that session is closed or its agent exits. "
            "There is no queue",
            conflictingSessionId=claim.session_key,
            workspace=claim.workspace,
        )
    last = hold.session.turns.last if hold.session is not None else None
    holder = last.label if last is not None and last.label else claim.session_key
    return BatonError(
        "workspace_busy",
        f"workspace tree is in use by run {holder} ({claim.workspace}); there is no queue",
        conflictingRunId=holder,
        workspace=claim.workspace,
    )


def busy_elsewhere(holder: ForeignHolder) -> BatonError:
    """``workspace_busy`` for a writer held by another Baton process."""
    return BatonError(
        "workspace_busy",
        f"workspace tree is in use by a writer of another Baton process (pid {holder.pid}, "
        f"{holder.workspace}); it is released when that writer ends. There is no queue",
        workspace=holder.workspace,
        holderPid=holder.pid,
    )
