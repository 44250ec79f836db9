"""One frozen request per Spawnea tool, built once at the surface (``docs/architecture.md`` §3.1).

The tool function's annotated parameters are the parse the SDK does (types, ranges, enums, the
contract's length bounds); ``parse`` adds the contract's shape rules the schema cannot say: a text
must not be blank, hold a NUL or a lone surrogate (``spawnea-control-api.md``: "strict schemas";
``spawnea_rename_session``: trimmed, 1-120 characters). Everything that depends on the host (the
catalogue, the scope, the session's state) stays in the service. Every ``parse`` raises
:class:`~baton.errors.BatonError` ``invalid_argument`` and changes nothing.

Field names are snake_case; the contract's camelCase names appear only at the surface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from baton.errors import BatonError
from baton.text import has_lone_surrogate

#: Longest prompt typed into a pane (characters; ``spawnea_send_prompt``: "at most 32,000").
PROMPT_MAX = 32_000
#: Longest recorded task (characters).
TASK_MAX = 4000
#: Longest display title (characters, after trimming; ``spawnea_rename_session``).
TITLE_MAX = 120
#: Longest ``clientRequestId`` (characters).
REQUEST_ID_MAX = 120
#: Longest session id, child alias, branch or model name a caller may pass (characters).
NAME_MAX = 200
#: Longest long-poll of ``spawnea_get_turn`` (milliseconds; the contract's "bounded to 30 s").
WAIT_MAX_MS = 30_000
#: Largest page of ``spawnea_get_turn`` (bytes).
BYTES_MAX = 131_072
#: The dashboard tabs ``spawnea_activate`` may select.
TABS = ("terminal", "files", "diff", "artifacts", "details", "agent-context")

Tab = Literal["terminal", "files", "diff", "artifacts", "details", "agent-context"]
WorkspaceMode = Literal["same-project", "new-worktree"]
OutputMode = Literal["compact", "raw"]


def request_id(value: str | None, *, required: bool) -> str:
    """A ``clientRequestId``; ``""`` when it is optional and absent."""
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not 1 <= len(value) <= REQUEST_ID_MAX:
        raise BatonError(
            "invalid_argument", f"clientRequestId must be 1-{REQUEST_ID_MAX} characters"
        )
    return value


def text(key: str, value: str | None, limit: int) -> str | None:
    """An optional text argument (``key`` as the contract names it): not blank, at most
    ``limit`` characters, no NUL or lone surrogate."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise BatonError("invalid_argument", f"{key} must be 1-{limit} characters")
    if "\x00" in value or has_lone_surrogate(value):
        raise BatonError("invalid_argument", f"{key} contains a NUL or a lone surrogate")
    return value


def required(key: str, value: str | None, limit: int) -> str:
    """:func:`text`, present."""
    if value is None:
        raise BatonError("invalid_argument", f"{key} is required")
    checked = text(key, value, limit)
    assert checked is not None
    return checked


def count(key: str, value: int | None, default: int, low: int, high: int) -> int:
    """An integer argument within ``[low, high]`` (``default`` when absent)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BatonError("invalid_argument", f"{key} must be an integer between {low} and {high}")
    return value


def one_of(key: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise BatonError("invalid_argument", f"{key} must be one of {list(allowed)}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateRoot:
    """``spawnea_create_session``."""

    client_request_id: str
    server_id: str
    project_id: str
    agent_id: str
    task: str
    base_branch: str | None = None
    use_worktree: bool = False

    @classmethod
    def parse(
        cls,
        *,
        client_request_id: str,
        server_id: str,
        project_id: str,
        agent_id: str,
        task: str,
        base_branch: str | None = None,
        use_worktree: bool = False,
    ) -> CreateRoot:
        return cls(
            client_request_id=request_id(client_request_id, required=True),
            server_id=server_id,
            project_id=project_id,
            agent_id=agent_id,
            task=required("task", task, TASK_MAX),
            base_branch=text("baseBranch", base_branch, NAME_MAX),
            use_worktree=bool(use_worktree),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateChild:
    """``spawnea_create_child_session``; ``task`` defaults to ``name``; ``client_request_id`` is
    ``""`` when absent (no replay)."""

    name: str
    task: str
    workspace: WorkspaceMode = "same-project"
    client_request_id: str = ""
    parent_session: str | None = None
    server_id: str | None = None
    project_id: str | None = None
    agent_id: str | None = None
    model: str | None = None
    initial_prompt: str | None = None

    @classmethod
    def parse(
        cls,
        *,
        name: str,
        workspace: str = "same-project",
        client_request_id: str | None = None,
        parent_session: str | None = None,
        server_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        model: str | None = None,
        task: str | None = None,
        initial_prompt: str | None = None,
    ) -> CreateChild:
        title = required("name", name, TITLE_MAX)
        if workspace not in ("same-project", "new-worktree"):
            raise BatonError("invalid_argument", "workspace must be same-project or new-worktree")
        return cls(
            name=title,
            task=text("task", task, TASK_MAX) or title,
            workspace=workspace,  # type: ignore[arg-type]  # checked just above
            client_request_id=request_id(client_request_id, required=False),
            parent_session=parent_session,
            server_id=server_id,
            project_id=project_id,
            agent_id=agent_id,
            model=text("model", model, NAME_MAX),
            initial_prompt=text("initialPrompt", initial_prompt, PROMPT_MAX),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SendPrompt:
    """``spawnea_send_prompt``; ``client_request_id`` is ``""`` when absent (no replay)."""

    target: str
    prompt: str
    parent_session: str | None = None
    client_request_id: str = ""

    @classmethod
    def parse(
        cls,
        *,
        target: str,
        prompt: str,
        parent_session: str | None = None,
        client_request_id: str | None = None,
    ) -> SendPrompt:
        return cls(
            target=target,
            prompt=required("prompt", prompt, PROMPT_MAX),
            parent_session=parent_session,
            client_request_id=request_id(client_request_id, required=False),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTurn:
    """``spawnea_get_turn``: ``wait_ms`` in milliseconds, ``max_bytes`` in UTF-8 bytes;
    ``cursor`` is the opaque text of an earlier answer (None or ``""``: from the turn's start)."""

    turn_id: str
    cursor: str | None = None
    after_version: int = 0
    wait_ms: int = 0
    output_mode: OutputMode = "compact"
    max_bytes: int = 32_768

    @classmethod
    def parse(
        cls,
        *,
        turn_id: str,
        cursor: str | None = None,
        after_version: int | None = None,
        wait_ms: int | None = None,
        output_mode: str = "compact",
        max_bytes: int | None = None,
    ) -> GetTurn:
        if output_mode not in ("compact", "raw"):
            raise BatonError("invalid_argument", "outputMode must be compact or raw")
        return cls(
            turn_id=turn_id,
            cursor=cursor,
            wait_ms=count("waitMs", wait_ms, 0, 0, WAIT_MAX_MS),
            after_version=count("afterVersion", after_version, 0, 0, 1 << 31),
            output_mode=output_mode,  # type: ignore[arg-type]  # checked just above
            max_bytes=count("maxBytes", max_bytes, 32_768, 1, BYTES_MAX),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Rename:
    """``spawnea_rename_session``; ``title`` is trimmed."""

    session_id: str
    title: str

    @classmethod
    def parse(cls, *, session_id: str, title: str) -> Rename:
        if not isinstance(title, str) or not title.strip() or len(title.strip()) > TITLE_MAX:
            raise BatonError("invalid_argument", f"title must be 1-{TITLE_MAX} characters")
        if has_lone_surrogate(title) or "\x00" in title:
            raise BatonError("invalid_argument", "title contains a NUL or a lone surrogate")
        return cls(session_id=session_id, title=title.strip())


@dataclass(frozen=True, slots=True, kw_only=True)
class Activate:
    """``spawnea_activate``."""

    session_id: str
    tab: Tab = "terminal"

    @classmethod
    def parse(cls, *, session_id: str, tab: str = "terminal") -> Activate:
        one_of("tab", tab, TABS)
        return cls(session_id=session_id, tab=tab)  # type: ignore[arg-type]  # checked


@dataclass(frozen=True, slots=True, kw_only=True)
class WorktreeRef:
    """``spawnea_inspect_worktree`` and ``spawnea_preflight_integration``: one session."""

    session_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFinalization:
    """``spawnea_request_finalization`` (who decides is the finalizer's, see
    :mod:`baton.engine.spawnea.finalize`)."""

    client_request_id: str
    session_id: str
    action: Literal["integrate", "close"]
    dirty_changes: Literal["stash", "discard"] | None = None
    confirmation: Literal["llm-validated"] | None = None

    @classmethod
    def parse(
        cls,
        *,
        client_request_id: str,
        session_id: str,
        action: str,
        dirty_changes: str | None = None,
        confirmation: str | None = None,
    ) -> RequestFinalization:
        one_of("action", action, ("integrate", "close"))
        if dirty_changes is not None:
            one_of("dirtyChanges", dirty_changes, ("stash", "discard"))
        if confirmation is not None:
            one_of("confirmation", confirmation, ("llm-validated",))
        return cls(
            client_request_id=request_id(client_request_id, required=True),
            session_id=session_id,
            action=action,  # type: ignore[arg-type]  # checked just above
            dirty_changes=dirty_changes,  # type: ignore[arg-type]
            confirmation=confirmation,  # type: ignore[arg-type]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GetFinalization:
    """``spawnea_get_finalization_request``."""

    request_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseSharedChild:
    """``spawnea_close_shared_child``."""

    session_id: str
    force: bool = False
