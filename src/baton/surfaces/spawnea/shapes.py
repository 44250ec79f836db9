"""The Spawnea tools' output shapes: they render the service's records into the contract's
results and publish the same models as each tool's MCP ``outputSchema`` (``docs/architecture.md``
§3.2).

Field names are snake_case with the contract's camelCase as their alias; every result carries
``apiVersion: "v1"`` (``spawnea-control-api.md``: "All structured responses include apiVersion").
Which keys are omitted rather than null is pinned per field (:attr:`_Shape.omit_if_none`, else
always present); a published schema requires every key that is always present. Every object
allows additional keys, so adding a field later is not a breaking change; removing or retyping
one is. Results of the git library (an inspection, a preflight report, a finalization request)
keep its keys; only the ones the contract names are typed here.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel

from baton.engine.spawnea.records import (
    Activated,
    ChildClosed,
    ChildCreated,
    FinalizationView,
    Preflight,
    PromptSent,
    Renamed,
    RootCreated,
    SessionList,
    StateView,
    TurnOutput,
    WorktreeInspection,
)

API_VERSION: Final = "v1"


def _required(schema: dict[str, Any], cls: type[BaseModel]) -> None:
    omitted: frozenset[str] = getattr(cls, "omit_if_none", frozenset())
    schema["required"] = [
        field.alias or name for name, field in cls.model_fields.items() if name not in omitted
    ]


class _Shape(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        from_attributes=True,
        extra="allow",
        json_schema_extra=_required,
    )
    omit_if_none: ClassVar[frozenset[str]] = frozenset()
    """Fields left out of a result when they are None (the others are null then)."""

    @model_serializer(mode="wrap")
    def _omit(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self.omit_if_none:
            key = to_camel(name)
            if key in data and data[key] is None:
                del data[key]
        return data


class _Result(_Shape):
    api_version: Literal["v1"] = API_VERSION


# -- pieces --------------------------------------------------------------------------------------


class CatalogRefShape(_Shape):
    id: str | None
    name: str | None = None
    kind: str | None = None
    command: str | None = None
    omit_if_none: ClassVar[frozenset[str]] = frozenset({"name", "kind", "command"})


class WorktreeShape(_Shape):
    managed: bool
    path: str
    branch: str
    base_branch: str


class EndedShape(_Shape):
    reason: str
    message: str
    at: str


class UiShape(_Shape):
    active_session_id: str | None
    active_tab: str | None


class RecentErrorShape(_Shape):
    at: str
    operation: str
    message: str


class SessionShape(_Shape):
    id: str
    name: str | None
    task: str | None
    host: CatalogRefShape
    project: CatalogRefShape
    harness: CatalogRefShape
    worktree: WorktreeShape | None
    workspace: str
    workspace_mode: str
    tmux_session_name: str | None
    creation_source: Literal["mcp"]
    status: str
    parent_session_id: str | None
    child_alias: str | None
    active: bool
    active_tab: str | None
    last_turn_id: str | None
    created_at: str
    ended: EndedShape | None
    removing: bool


class ExtractionShape(_Shape):
    source: Literal["agent_record", "screen"]


class PromptErrorShape(_Shape):
    code: str
    message: str


class ParentCommitShape(_Shape):
    commit: str
    subject: str


# -- results, one per tool -----------------------------------------------------------------------


class StateResult(_Result):
    mode: Literal["bootstrap"] | None = None
    ui: UiShape | None = None
    sessions: list[SessionShape] | None = None
    hosts: list[CatalogRefShape]
    projects: list[CatalogRefShape]
    harnesses: list[CatalogRefShape]
    recent_errors: list[RecentErrorShape] | None = None
    omit_if_none: ClassVar[frozenset[str]] = frozenset({"mode", "ui", "sessions", "recent_errors"})


class SessionListResult(_Result):
    sessions: list[SessionShape]


class RootCreatedResult(_Result):
    session_created: bool
    replayed: bool
    root_session_id: str
    session_id: str
    session: SessionShape


class ChildCreatedResult(_Result):
    parent_session_id: str
    child_alias: str
    session_id: str
    child_session_id: str
    name: str | None
    display_name: str | None
    workspace: str
    workspace_mode: str
    status: str
    initial_status: str
    session: SessionShape
    prompt_status: str | None = None
    """With ``initialPrompt`` only: the prompt's turn status, or ``failed``."""
    turn_id: str | None = None
    """With ``initialPrompt`` only (null when it failed)."""
    prompt_delivered: bool | None = None
    prompt_error: PromptErrorShape | None = None
    replayed: bool
    omit_if_none: ClassVar[frozenset[str]] = frozenset(
        {"prompt_status", "turn_id", "prompt_delivered", "prompt_error"}
    )

    @classmethod
    def of(cls, record: ChildCreated) -> ChildCreatedResult:
        prompt: dict[str, Any] = {}
        if (initial := record.initial) is not None:
            prompt = {"prompt_status": initial.status, "turn_id": initial.turn_id}
            if initial.error is not None:
                prompt["prompt_error"] = PromptErrorShape.model_validate(initial.error)
            else:
                prompt["prompt_delivered"] = initial.delivered
        return cls(
            parent_session_id=record.parent_session_id,
            child_alias=record.child_alias,
            session_id=record.session_id,
            child_session_id=record.session_id,
            name=record.name,
            display_name=record.name,
            workspace=record.workspace,
            workspace_mode=record.workspace_mode,
            status=record.status,
            initial_status=record.status,
            session=SessionShape.model_validate(record.session),
            replayed=record.replayed,
            **prompt,
        )

    @model_serializer(mode="wrap")
    def _omit(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        # A failed initial prompt says so with turnId null; without one there is no turnId.
        keep_turn = data.get("promptStatus") is not None
        for name in self.omit_if_none:
            key = to_camel(name)
            if key in data and data[key] is None and not (key == "turnId" and keep_turn):
                del data[key]
        return data


class PromptSentResult(_Result):
    session_id: str
    turn_id: str
    version: int
    status: str
    delivered: bool
    delivery_method: Literal["tmux"]
    accepted_at: str
    replayed: bool
    message: str


class TurnOutputResult(_Result):
    turn_id: str
    session_id: str
    status: str
    version: int
    cursor_expired: bool
    truncated: bool
    completion_basis: str | None = None
    reason: str | None = None
    output: str
    omitted: int | None = None
    """Compact mode only: UTF-8 bytes dropped from the start of the answer."""
    extraction: ExtractionShape | None = None
    cursor: str
    omit_if_none: ClassVar[frozenset[str]] = frozenset(
        {"completion_basis", "reason", "omitted", "extraction"}
    )


class RenamedResult(_Result):
    session: SessionShape
    delivered_to_renderer: bool


class ActivatedResult(_Result):
    ui: UiShape
    delivered_to_renderer: bool


class ChildClosedResult(_Result):
    session_id: str
    removed: bool
    workspace_preserved: bool


class InspectionResult(_Result):
    session_id: str
    inspection: dict[str, Any]


class PreflightResult(_Result):
    """The contract's fields, plus the git library's own (``parentHead``, ``childHead``, ...)."""

    session_id: str
    parent_branch: str
    base_commit: str
    parent_commits: list[ParentCommitShape]
    has_conflicts: bool
    conflicting_files: list[str]
    truncated: bool

    @classmethod
    def of(cls, record: Preflight) -> PreflightResult:
        return cls.model_validate({**record.body, "sessionId": record.session_id})


class FinalizationResult(_Result):
    """A request's view: the contract's fields, plus the git library's own (``result``,
    ``error``, ``steps``, ``discardPreview``, ...). ``requestId`` is ``id``, the name
    ``spawnea_get_finalization_request`` takes it by; ``replayed`` only answers a request."""

    replayed: bool | None = None
    id: str
    request_id: str
    client_request_id: str
    session_id: str
    action: str
    mode: str
    status: Literal["pending", "executing", "completed", "rejected", "failed"]
    approved: bool
    omit_if_none: ClassVar[frozenset[str]] = frozenset({"replayed"})

    @classmethod
    def of(cls, record: FinalizationView) -> FinalizationResult:
        body = {**record.body, "requestId": record.body["id"]}
        return cls.model_validate({**body, "replayed": record.replayed})


def render(shape: _Shape) -> dict[str, Any]:
    """A shape as the tool's ``structuredContent``."""
    return shape.model_dump(by_alias=True, mode="json")


def of(record: object) -> dict[str, Any]:
    """The result of any Spawnea record, rendered by its shape."""
    shape = _BY_RECORD.get(type(record))
    if shape is None:
        raise TypeError(f"no Spawnea shape renders {type(record).__name__}")
    factory = getattr(shape, "of", None)
    built = factory(record) if factory is not None else shape.model_validate(record)
    return render(built)


_BY_RECORD: dict[type, type[_Shape]] = {
    StateView: StateResult,
    SessionList: SessionListResult,
    RootCreated: RootCreatedResult,
    ChildCreated: ChildCreatedResult,
    PromptSent: PromptSentResult,
    TurnOutput: TurnOutputResult,
    Renamed: RenamedResult,
    Activated: ActivatedResult,
    ChildClosed: ChildClosedResult,
    WorktreeInspection: InspectionResult,
    Preflight: PreflightResult,
    FinalizationView: FinalizationResult,
}

#: Each tool's published ``outputSchema`` (successful ``structuredContent`` conforms).
_BY_TOOL: dict[str, type[_Shape]] = {
    "spawnea_get_state": StateResult,
    "spawnea_create_session": RootCreatedResult,
    "spawnea_list_sessions": SessionListResult,
    "spawnea_create_child_session": ChildCreatedResult,
    "spawnea_send_prompt": PromptSentResult,
    "spawnea_get_turn": TurnOutputResult,
    "spawnea_rename_session": RenamedResult,
    "spawnea_activate": ActivatedResult,
    "spawnea_inspect_worktree": InspectionResult,
    "spawnea_preflight_integration": PreflightResult,
    "spawnea_request_finalization": FinalizationResult,
    "spawnea_get_finalization_request": FinalizationResult,
    "spawnea_close_shared_child": ChildClosedResult,
}
OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    tool: shape.model_json_schema() for tool, shape in _BY_TOOL.items()
}
