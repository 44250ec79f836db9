"""droid-mcp's commands that start and steer sessions: ``droid_start``, ``droid_send``,
``droid_respond`` and ``droid_cancel`` (``droid-mcp.md``; ``WAVE2.md`` §7.3, §7.4, §7.6).

Idempotency (``droid-mcp.md``, "Idempotency keys"): ``idempotencyKey`` is required; it is claimed
``pending`` (durably) before anything runs; a refusal before any side effect drops it; once a
turn has been handed to Droid the key keeps its first result for 7 days and an exact retry
replays it (``droid_start`` with the session's current state); a key left pending by a crash is
refused (``request_pending``); different arguments under a used key are
``idempotency_conflict``. ``droid_send`` to a session Baton does not run (a guarded local resume
or the Factory REST API) is :mod:`baton.engine.droid_mcp.send_routes`. The reads
(``droid_find``, ``droid_models``, ``droid_wait``, ``droid_result``) are in
:mod:`baton.engine.droid_mcp.reads`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.config import AUTONOMY_ORDER
from baton.engine.droid_mcp.arguments import check_in_repository, prompt_text, request_key
from baton.engine.droid_mcp.own import OwnSession, OwnSessions
from baton.engine.droid_mcp.routing import Target, check_session_id, unknown_session
from baton.engine.droid_mcp.send_routes import resume_locally, send_rest
from baton.engine.droid_mcp.settings import Settings, parse_settings
from baton.engine.idempotency import Intents
from baton.engine.intents import fingerprint
from baton.engine.policy import Expiring
from baton.engine.validation import AUTONOMY_LEVELS
from baton.engine.workspaces import approve_workspace
from baton.errors import BatonError
from baton.harnesses.droid.limits import WORKSPACE_LIMITS
from baton.harnesses.droid.local.index import SessionFileIndex
from baton.harnesses.droid.local.index_file import FILE_NAME as INDEX_FILE_NAME
from baton.harnesses.droid.rest import FactoryRestError, SessionsApi

if TYPE_CHECKING:
    from baton.engine.engine import Engine

SURFACE = "droid-mcp"


class DroidMcp:
    """The droid-mcp surface's engine service (one per engine)."""

    def __init__(
        self, engine: Engine, *, factory_home: Path, rest: SessionsApi | None = None
    ) -> None:
        self.engine = engine
        self.config = engine.config
        self.settings = engine.config.droidMcp
        self.own = OwnSessions(engine, self.settings)
        self.intents = Intents(
            engine.store, SURFACE, Expiring(days=self.settings.keyRetentionDays), engine.epoch
        )
        self.factory_home = factory_home
        # Kept across restarts in the state directory, so the first droid_find after a restart
        # reads only the session files that changed meanwhile (index_file's docstring).
        self.index = SessionFileIndex(
            factory_home, index_file=Path(self.config.stateDirectory) / INDEX_FILE_NAME
        )
        self.rest = rest

    # -- routing -----------------------------------------------------------------------------

    def target(self, session: object) -> Target:
        """Where ``session`` lives (own, local, remote)."""
        session_id = check_session_id(session)
        own = self.own.get(session_id)
        if own is not None and not own.closed:
            return Target("own", session_id, own=own)
        # A closed own session is an ordinary local session for sends (its transcript, if any),
        # while reads keep its in-memory state (``droid-mcp.md``, "Known limits").
        record = self.index.get(session_id)
        if own is not None:
            return Target("own", session_id, own=own, record=record)
        if record is not None:
            return Target("local", session_id, record=record)
        ran_here = bool(self.engine.store.sessions_by_agent_id(session_id))
        return Target("remote", session_id, ran_here=ran_here)

    # -- droid_start -------------------------------------------------------------------------

    async def start(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """A new own session and its first turn. Returns ``{sessionId, state, via, runId,
        nextSeq, cwd, replayed, worktree?}`` (``cwd``: where the session works; with
        ``worktree``, in the worktree Droid made, ``{path, branch}``).

        Raises
        ------
        BatonError
            ``invalid_argument``, ``unsupported_setting``, ``workspace_not_approved``,
            ``autonomy_above_ceiling``, ``unknown_model``, ``unsupported_reasoning``,
            ``unknown_session`` (fork source), ``idempotency_conflict``, ``request_pending``,
            ``capacity_exhausted``, ``workspace_busy``, ``agent_failed``.
        """
        key = request_key(args)
        prompt = prompt_text(args)
        settings = parse_settings(args)
        autonomy = self._autonomy(args.get("autonomy"), default="off") or "off"
        cwd = args.get("cwd")
        if not isinstance(cwd, str):
            raise BatonError("invalid_argument", "cwd must be an absolute directory path")
        workspace = approve_workspace(cwd, self.config.approvedDirectories, limits=WORKSPACE_LIMITS)
        if settings.worktree is not None:
            check_in_repository(workspace)
        if settings.fork is not None:
            self._check_fork_source(settings.fork)
        await self._check_models(settings)
        print_ = fingerprint(
            {"op": "start", "cwd": workspace, "prompt": prompt, "autonomy": autonomy}
            | settings.fingerprint_view()
        )
        claim = self.intents.claim(key, print_)
        if claim.status == "replay":
            return self._replayed(claim.result)
        try:
            own = await self.own.launch(
                workspace=workspace,
                autonomy=autonomy,
                model=settings.model,
                reasoning_effort=settings.reasoning_effort,
                options=settings.open_options(),
                resume_id=None,
                fork_from=settings.fork,
                via="own",
            )
        except BaseException:
            self.intents.drop(key)  # nothing reached Droid: the key may be used again
            raise
        result = await self._first_turn(own, prompt, {}, key, launched=True)
        self.intents.complete(key, result, session_key=own.session_key)
        return result

    def _check_fork_source(self, source: str) -> None:
        check_session_id(source)
        if self.index.get(source) is None:
            raise BatonError("unknown_session", f"fork source {source!r} is not on this machine")
        own = self.own.get(source)
        if own is not None and not own.closed:
            raise BatonError(
                "session_busy",
                f"fork source {source!r} is open in this server; fork it once it is closed",
            )

    # -- droid_send --------------------------------------------------------------------------

    async def send(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """A prompt to a session: own (its worker), local (guarded resume) or remote (REST).

        Returns ``{sessionId, via, state, runId?, nextSeq?, messageId?, ignored, applied?,
        replayed}``.

        Raises
        ------
        BatonError
            As :meth:`start`, plus ``session_busy`` (``queue`` while a turn runs, or an
            interrupt that did not stop it in time), ``local_resume_refused``,
            ``rest_required``, ``rest_failed``, ``unknown_session``.
        """
        key = request_key(args)
        prompt = prompt_text(args)
        settings = parse_settings(args)
        mode = args.get("mode", "queue")
        if mode not in ("queue", "interrupt"):
            raise BatonError("invalid_argument", "mode must be queue or interrupt")
        autonomy = self._autonomy(args.get("autonomy"), default=None)
        target = self.target(args.get("session"))
        await self._check_models(settings)
        print_ = fingerprint(
            {"op": "send", "session": target.session_id, "prompt": prompt, "mode": mode}
            | {"autonomy": autonomy, "allowLocalResume": bool(args.get("allowLocalResume"))}
            | settings.fingerprint_view()
        )
        claim = self.intents.claim(key, print_)
        if claim.status == "replay":
            return {**(claim.result or {}), "replayed": True}
        try:
            if target.own is not None and not target.own.closed:
                own = target.own
                await self.own.check_writer(own.workspace, ignore=own)  # before interrupting
                await self._make_free(own, mode)
                self.own.check_turn_slot(own.repo, ignore=own)
                result_args: tuple[OwnSession, str] = (own, "own")
            elif self.rest is None and (target.kind != "remote" or target.ran_here):
                own = await resume_locally(self, target, args, autonomy, settings)
                result_args = (own, "local-resume")
            else:
                result = await send_rest(self.rest, target, prompt, autonomy, settings)
                self.intents.complete(key, result)
                return result
        except BaseException:
            self.intents.drop(key)
            raise
        own, via = result_args
        changes = (
            settings.turn_settings(autonomy) if via == "own" else settings.resume_turn_settings()
        )
        result = await self._first_turn(
            own, prompt, changes, key, via=via, launched=via == "local-resume"
        )
        result["ignored"] = settings.ignored_by_send()
        self.intents.complete(key, result, session_key=own.session_key)
        return result

    async def _make_free(self, own: OwnSession, mode: str) -> None:
        if not own.busy:
            return
        if mode == "queue":
            raise BatonError(
                "session_busy",
                "a turn is running in this session; queue is refused while a turn runs (wait "
                "for it, or send with mode interrupt)",
            )
        wait_s = self.settings.interruptWaitMs / 1000
        if not await self.own.interrupt(own, wait_s):
            raise BatonError(
                "session_busy",
                f"the running turn did not stop within {wait_s:g} s; nothing was sent",
            )

    async def _first_turn(
        self,
        own: OwnSession,
        prompt: str,
        changes: dict[str, Any],
        key: str,
        *,
        via: str = "own",
        launched: bool,
    ) -> dict[str, Any]:
        """Submit the request's turn. A refusal before the prompt reached Droid (the writer lock
        or the live-turn limits, taken again atomically with the commit) drops the key so the
        identical retry runs later, and closes a session launched for this request
        (``droid-mcp.md``, "Idempotency keys": a refusal before any side effect drops it);
        after the submit, the key keeps its pending claim (an error then is ``unknown``)."""
        next_seq = own.live.log.last_seq
        try:
            run_id, sent = self.own.submit(own, prompt, changes, key)
        except BaseException:
            self.intents.drop(key)
            if launched:
                await self.own.discard(own)
            raise
        await sent
        result: dict[str, Any] = {
            "sessionId": own.agent_id,
            "via": via,
            "state": own.state,
            "runId": run_id,
            "nextSeq": next_seq,
            "cwd": own.cwd,
            "replayed": False,
        }
        if own.worktree is not None:
            result["worktree"] = {"path": own.worktree["path"], "branch": own.worktree["branch"]}
        return result

    def _replayed(self, first: dict[str, Any] | None) -> dict[str, Any]:
        result = dict(first or {})
        own = self.own.get(str(result.get("sessionId")))
        if own is not None:
            result["state"] = own.state  # a replayed start shows the session as it is now
        elif result.get("sessionId"):
            result["state"] = "closed"
        result["replayed"] = True
        return result

    # -- droid_respond and droid_cancel ------------------------------------------------------

    async def respond(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a pending prompt of an own session. Returns ``{sessionId, requestId,
        answered, response}``.

        Raises
        ------
        BatonError
            ``unknown_request`` (also when the session's worker is gone, so the answer cannot
            reach Droid), ``invalid_argument``, ``not_own_session`` (Factory's REST API
            documents no endpoint for pending prompts, so other sessions' prompts cannot be
            answered here).
        """
        target = self.target(args.get("session"))
        request_id = args.get("requestId")
        if not isinstance(request_id, str) or not request_id or len(request_id) > 200:
            raise BatonError("invalid_argument", "requestId must be a requestId from attention")
        if target.own is None or target.own.closed:
            raise BatonError(
                "not_own_session",
                "only the prompts of sessions Baton runs can be answered (Factory's REST API "
                "documents no endpoint for pending prompts)",
            )
        answers = args.get("answers")
        if answers is not None and not (
            isinstance(answers, list) and all(isinstance(a, dict) for a in answers)
        ):
            raise BatonError("invalid_argument", "answers must be a list of {answer, index?}")
        live = target.own.live
        response = live.prompts.response(
            request_id,
            decision=args.get("decision"),
            comment=args.get("comment"),
            answers=answers,
            cancel=args.get("cancel") is True,
        )
        await live.answer(request_id, response)  # answered means it reached the worker
        target.own.last_active = time.monotonic()
        return {
            "sessionId": target.session_id,
            "requestId": request_id,
            "answered": True,
            "response": response,
        }

    async def cancel(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Interrupt a turn (``scope: "turn"``) or close an own session (``"session"``).
        Returns ``{sessionId, scope, changed, state, message}``."""
        scope = args.get("scope", "turn")
        if scope not in ("turn", "session"):
            raise BatonError("invalid_argument", "scope must be turn or session")
        target = self.target(args.get("session"))
        own = target.own
        if own is not None and own.closed and scope == "session":
            message = "the session was already closed; nothing changed"
            return _cancelled(target.session_id, scope, False, own.state, message)
        if own is None or own.closed:
            if scope == "session":
                raise BatonError(
                    "not_own_session", "only sessions Baton runs can be closed (scope session)"
                )
            if self.rest is None:
                raise unknown_session(target.session_id, rest=False)
            try:
                await self.rest.interrupt(target.session_id)
            except FactoryRestError as exc:
                raise BatonError("rest_failed", f"Factory REST: {exc}") from exc
            message = "interrupt sent through the Factory REST API"
            return _cancelled(target.session_id, scope, True, "unknown", message)
        if scope == "turn":
            changed = own.busy
            stopped = await self.own.interrupt(own, self.config.cancelGraceMs / 1000 + 1)
            message = (
                ("the turn was interrupted" if stopped else "interrupt sent; the turn is ending")
                if changed
                else "no turn was running; nothing changed"
            )
            return _cancelled(target.session_id, scope, changed, own.state, message)
        await self.own.close(own, wait=True)
        message = "the session was closed and its Droid process stopped"
        return _cancelled(target.session_id, scope, True, own.state, message)

    # -- shared checks -----------------------------------------------------------------------

    def _autonomy(self, value: object, *, default: str | None) -> str | None:
        if value is None:
            return default
        if value not in AUTONOMY_LEVELS:
            raise BatonError("invalid_argument", f"autonomy must be one of {list(AUTONOMY_LEVELS)}")
        level = str(value)
        if AUTONOMY_ORDER[level] > AUTONOMY_ORDER[self.config.maxAutonomy]:
            raise BatonError(
                "autonomy_above_ceiling",
                f"autonomy {level!r} is above this host's cap {self.config.maxAutonomy!r}",
                maxAutonomy=self.config.maxAutonomy,
            )
        return level

    async def _check_models(self, settings: Settings) -> None:
        catalogue = self.engine.catalogue
        if settings.model is not None:
            await catalogue.check(settings.model, settings.reasoning_effort)
        if settings.spec_model is not None:
            await catalogue.check(settings.spec_model, settings.spec_reasoning_effort)
        elif settings.spec_reasoning_effort is not None and settings.model is not None:
            await catalogue.check(settings.model, settings.spec_reasoning_effort)


def _cancelled(session: str, scope: str, changed: bool, state: str, message: str) -> dict[str, Any]:
    return {
        "sessionId": session,
        "scope": scope,
        "changed": changed,
        "state": state,
        "message": message,
    }
