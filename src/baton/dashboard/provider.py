"""What the dashboard reads and does: the :class:`DashboardProvider` protocol and its values.

The dashboard app (:mod:`baton.dashboard.app`) knows nothing of the engine, the store, git or
tmux; it talks to one provider. :class:`~baton.dashboard.engine_provider.EngineProvider` is the
in-process one over Baton's own engine objects; the daemon (``WAVE2.md`` §8, W2-E) extends it
with what lives there (finalization approvals, the Agent Context log, Spawnea's UI state, tmux
pane snapshots).

Rules every provider keeps:

- reads are cheap and bounded: a page of sessions is one paged query plus one batched lookup, no
  query per row (the list must render fast with 10,000 stored sessions);
- a rejected action raises :class:`~baton.errors.BatonError` with a contract code
  (``unknown_request``, ``invalid_argument``, ``not_found``, ``conflict``, ``operation_failed``)
  and changes nothing; the page shows its message;
- answers to prompts follow ``droid_respond`` exactly (``droid-mcp.md``; the validation lives in
  the session's prompt registry, :mod:`baton.engine.runtime.prompts`): only offered decisions,
  one answer per question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

#: Surfaces a session can belong to (``baton.engine.policy.POLICIES``), for the list's filter.
SURFACES = ("controller", "droid-mcp", "spawnea")


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One row of the session list.

    ``state`` is the most telling word available: ``waiting`` (a prompt waits for an answer),
    ``running``, ``idle`` (live, between turns), else the head turn's state (``succeeded``,
    ``failed``, ...) or the session's stored status (``open``, ``closed``, ...). ``last_activity``
    is UTC ISO 8601. ``waiting`` marks a session that needs the operator (a pending prompt or a
    pending finalization); ``active`` marks the session Spawnea's UI state has active.
    """

    session_key: str
    surface: str
    harness: str
    workspace: str
    name: str | None
    state: str
    live: bool
    last_activity: str
    waiting: bool = False
    active: bool = False


@dataclass(frozen=True, slots=True)
class SessionPage:
    """A page of sessions, newest activity first, and the total matching the filter."""

    rows: Sequence[SessionSummary]
    total: int
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """One turn (a ``runs`` row): ids, state, UTC ISO times, the outcome's reason and message."""

    turn_id: str
    run_id: str
    state: str
    created_at: str
    finished_at: str | None
    reason: str | None
    message: str | None
    model: str | None


@dataclass(frozen=True, slots=True)
class EventView:
    """One event of a session's live log (:class:`baton.engine.eventlog.LogEvent`): ``seq`` from
    1 within its stream, ``at`` UTC ISO, ``type`` and a bounded ``data`` mapping."""

    seq: int
    at: str
    type: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SessionDetail:
    """The session page's data.

    ``turns`` are newest first (at most the provider's page size). ``final_text`` is the head
    turn's final answer, cut at ``FINAL_TEXT_LIMIT`` characters (``final_text_truncated``);
    ``text_tail`` is the streamed text of a live turn. ``recorded_events`` are the last events
    stored with the head turn, shown when the session is not live. ``has_diff``: a working-tree
    diff can be asked for; ``has_pane``: a tmux pane snapshot can be asked for.
    """

    summary: SessionSummary
    created_at: str
    agent_session_id: str | None
    parent_session_key: str | None
    turns: Sequence[TurnSummary]
    final_text: str | None
    final_text_truncated: bool = False
    text_tail: str | None = None
    recorded_events: Sequence[EventView] = ()
    has_diff: bool = False
    has_pane: bool = False


@dataclass(frozen=True, slots=True)
class Cursor:
    """A reader's place in a session's event stream: the stream's identity (a live session's
    log; a new live session of the same Baton session starts a new stream) and the last ``seq``
    seen in it. Rendered as ``<stream>-<seq>``, the SSE event id."""

    stream: str
    seq: int

    def __str__(self) -> str:
        return f"{self.stream}-{self.seq}"

    @classmethod
    def parse(cls, text: str | None) -> Cursor | None:
        """``<stream>-<seq>`` back into a cursor; None for anything malformed (read from the
        start then)."""
        if not text or len(text) > 100:
            return None
        stream, _, seq = text.rpartition("-")
        if not stream or not seq.isdigit() or len(seq) > 12:
            return None
        return cls(stream, int(seq))


@dataclass(frozen=True, slots=True)
class EventBatch:
    """A cursor read of a live session's log.

    ``reset``: the cursor named another stream (or none), so this batch starts the current one
    from its oldest kept event; ``gap``: events after the cursor were already dropped from the
    ring; ``closed``: the live session ended and no more events will come in this stream.
    """

    stream: str
    events: Sequence[EventView]
    next_seq: int
    gap: bool
    reset: bool
    closed: bool

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.stream, self.next_seq)


@dataclass(frozen=True, slots=True)
class PromptView:
    """A pending permission request or question (a prompt a live session's registry holds).

    ``allowed`` are the decisions the operator may choose (already filtered by the autonomy cap;
    a refusal always among them), ``labels`` their words where the agent gave them. ``title``
    is the request's own (bounded, clean). ``tool_uses`` (permission) and ``questions``
    (question) are the agent's payload, bounded.
    """

    session_key: str
    request_id: str
    turn_id: str
    kind: str
    created_at: str
    allowed: Sequence[str] = ()
    tool_uses: Sequence[Mapping[str, Any]] = ()
    questions: Sequence[Mapping[str, Any]] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    title: str = ""


@dataclass(frozen=True, slots=True)
class ParentCommit:
    commit: str
    subject: str


@dataclass(frozen=True, slots=True)
class PreflightView:
    """The integration preflight an approval runs on (W2-D ``PreflightReport.to_json()``:
    ``{parentBranch, baseCommit, parentCommits[{commit, subject}], parentCommitCount,
    hasConflicts, conflictingFiles, truncated}``)."""

    parent_branch: str
    base_commit: str
    parent_commits: Sequence[ParentCommit]
    parent_commit_count: int
    has_conflicts: bool
    conflicting_files: Sequence[str]
    truncated: bool

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> PreflightView:
        commits = [
            ParentCommit(str(c.get("commit", "")), str(c.get("subject", "")))
            for c in body.get("parentCommits") or []
            if isinstance(c, Mapping)
        ]
        return cls(
            parent_branch=str(body.get("parentBranch", "")),
            base_commit=str(body.get("baseCommit", "")),
            parent_commits=commits,
            parent_commit_count=int(body.get("parentCommitCount", len(commits))),
            has_conflicts=bool(body.get("hasConflicts")),
            conflicting_files=[str(f) for f in body.get("conflictingFiles") or []],
            truncated=bool(body.get("truncated")),
        )


@dataclass(frozen=True, slots=True)
class FinalizationView:
    """A finalization request (W2-D ``FinalizationRequest.to_json(worktree)``): ``status`` is
    ``pending``, ``executing``, ``completed``, ``rejected`` or ``failed``; ``approved`` tells a
    pending request that was approved but has not run yet. ``result`` and ``error`` are the
    library's JSON after execution."""

    request_id: str
    session_key: str
    action: str
    mode: str
    status: str
    approved: bool
    created_at: str
    session_name: str | None = None
    branch: str | None = None
    base_branch: str | None = None
    worktree_path: str | None = None
    dirty_changes: str | None = None
    preflight: PreflightView | None = None
    resolved_at: str | None = None
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    discard_preview: Mapping[str, Any] | None = None
    """What a discard not yet run would destroy (``baton.git.discard_preview``)."""

    @classmethod
    def from_json(
        cls, body: Mapping[str, Any], session_name: str | None = None
    ) -> FinalizationView:
        """From the W2-D view ``{id, sessionId, action, mode, status, approved, createdAt,
        branch?, baseBranch?, worktreePath?, dirtyChanges?, preflight?, resolvedAt?, result?,
        error?, discardPreview?}``."""
        preflight = body.get("preflight")
        checked = PreflightView.from_json(preflight) if isinstance(preflight, Mapping) else None
        return cls(
            request_id=str(body["id"]),
            session_key=str(body["sessionId"]),
            action=str(body.get("action", "")),
            mode=str(body.get("mode", "")),
            status=str(body.get("status", "")),
            approved=bool(body.get("approved")),
            created_at=str(body.get("createdAt", "")),
            session_name=session_name,
            branch=body.get("branch"),
            base_branch=body.get("baseBranch"),
            worktree_path=body.get("worktreePath"),
            dirty_changes=body.get("dirtyChanges"),
            preflight=checked,
            resolved_at=body.get("resolvedAt"),
            result=body.get("result"),
            error=body.get("error"),
            discard_preview=body.get("discardPreview"),
        )


@dataclass(frozen=True, slots=True)
class DiffFileView:
    path: str
    added: int | None
    deleted: int | None
    binary: bool
    new: bool


@dataclass(frozen=True, slots=True)
class DiffView:
    """A working-tree diff (:class:`baton.git.diff.WorkspaceDiff`): git's text, cut at
    its byte cap (``truncated``), and the changed files."""

    text: str
    truncated: bool
    files: Sequence[DiffFileView] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """One entry of the Agent Context log: what a scoped Spawnea connection did (bound, was
    refused, prompted a child, ...), UTC ISO ``at``."""

    at: str
    connection: str
    origin: str
    root_session_key: str | None
    action: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class UiState:
    """Spawnea's in-memory UI state as ``spawnea_activate`` sets it."""

    active_session_key: str | None
    active_tab: str | None
    updated_at: str | None = None


class DashboardProvider(Protocol):
    """Everything the dashboard reads and does (see the module docstring for the rules)."""

    def sessions_page(
        self, offset: int, limit: int, *, surface: str | None = None, query: str | None = None
    ) -> SessionPage:
        """Sessions across surfaces, newest activity first; ``query`` matches a substring of the
        workspace or name, or an exact session or agent id."""
        ...

    def session(self, session_key: str) -> SessionDetail | None:
        """The session page's data, or None if there is no such session."""
        ...

    def read_events(
        self, session_key: str, after: Cursor | None, max_events: int
    ) -> EventBatch | None:
        """Events of the session's live log after ``after``, oldest first; None while the
        session is not live."""
        ...

    async def wait_events(self, session_key: str, after: Cursor, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for something after ``after`` (an event, the end of
        the stream, the session going live or away). True if there may be something to read."""
        ...

    async def wait_activity(self, after: str | None, timeout_s: float) -> str:
        """Wait up to ``timeout_s`` seconds until anything the pages show may have changed
        since the activity token ``after``; return the current token (opaque, equal tokens mean
        nothing changed)."""
        ...

    def pending_prompts(self, session_key: str | None = None) -> Sequence[PromptView]:
        """Pending prompts of one session, or of every live session; oldest first."""
        ...

    async def answer_prompt(
        self,
        session_key: str,
        request_id: str,
        *,
        decision: str | None = None,
        comment: str | None = None,
        answers: Sequence[Mapping[str, Any]] | None = None,
        cancel: bool = False,
    ) -> None:
        """Answer a pending prompt with ``droid_respond``'s rules; returns once the answer
        reached the agent's side. Raises ``unknown_request`` (also when the agent is gone, so
        it can no longer be answered) or ``invalid_argument``."""
        ...

    def pending_finalizations(self) -> Sequence[FinalizationView]:
        """Finalization requests waiting for the operator (``pending``, not yet approved)."""
        ...

    async def approve_finalization(self, request_id: str) -> FinalizationView:
        """Approve and execute a pending request; the request as it ended (``completed`` or
        ``failed``). Raises ``not_found`` or ``conflict`` (not pending)."""
        ...

    async def reject_finalization(self, request_id: str, reason: str | None) -> FinalizationView:
        """Reject a pending request; nothing in git changes. Raises ``not_found``/``conflict``."""
        ...

    async def diff(self, session_key: str) -> DiffView | None:
        """The working-tree diff of the session's workspace; None if it has none."""
        ...

    async def pane_snapshot(self, session_key: str) -> str | None:
        """The visible text of the session's tmux pane, read-only; None if it has no pane."""
        ...

    def agent_context(self, limit: int) -> Sequence[ContextEntry]:
        """The newest ``limit`` entries of the Agent Context log, newest first."""
        ...

    def ui_state(self) -> UiState | None:
        """Spawnea's UI state, or None when no Spawnea surface is hosted."""
        ...
