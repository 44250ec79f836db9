"""Hand-made Droid session files, shaped like the ones Droid CLI 0.225.2 writes.

The record shapes copy real files (``shared/design/WAVE2.md`` §4.2–§4.3): a ``session_start``
header, an ``llm_only`` context record before each prompt, ``message`` records, tool results as
``user`` records with snake_case ``tool_result`` blocks, and an ``agent_turn_outcome`` per turn.
Settings files are written the way Droid writes them: to a temporary name, then renamed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

Json = dict[str, Any]
BASE_TIME = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)


def stamp(seconds: float) -> str:
    """An ISO timestamp ``seconds`` after :data:`BASE_TIME`, as Droid writes it."""
    moment = BASE_TIME + timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def project_dir(factory_home: Path, cwd: str) -> Path:
    """``sessions/-<cwd with / as ->`` (Droid's lossy directory naming)."""
    return factory_home / "sessions" / ("-" + cwd.strip("/").replace("/", "-"))


def header(session_id: str, title: str, cwd: str, **extra: Any) -> Json:
    return {
        "type": "session_start",
        "id": session_id,
        "title": title,
        "owner": "unknown",
        "version": 2,
        "cwd": cwd,
        "hostId": "host-1",
        **extra,
    }


def text_message(record_id: str, role: str, text: str, at: float, **extra: Any) -> Json:
    message: Json = {"role": role, "content": [{"type": "text", "text": text}], **extra}
    return {"type": "message", "id": record_id, "timestamp": stamp(at), "message": message}


def tool_use(record_id: str, tool_id: str, name: str, at: float, text: str | None = None) -> Json:
    content: list[Json] = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": tool_id, "name": name, "input": {"x": 1}})
    return {
        "type": "message",
        "id": record_id,
        "timestamp": stamp(at),
        "message": {"role": "assistant", "content": content},
    }


def tool_result(record_id: str, tool_id: str, at: float, content: str = "done") -> Json:
    block = {"type": "tool_result", "tool_use_id": tool_id, "is_error": False, "content": content}
    return {
        "type": "message",
        "id": record_id,
        "timestamp": stamp(at),
        "message": {"role": "user", "content": [block]},
    }


def outcome(turn_id: str, reason: str = "completed") -> Json:
    return {"type": "agent_turn_outcome", "turnId": turn_id, "reason": reason, "resultKind": "text"}


def prompt(turn_id: str, text: str, at: float) -> list[Json]:
    """The context record Droid writes before a prompt, then the prompt (id = turnId)."""
    context = text_message(
        f"context-{turn_id}",
        "user",
        "<system-reminder>x</system-reminder>",
        at,
        visibility="llm_only",
    )
    return [context, text_message(turn_id, "user", text, at, userMessageSource="sdk")]


def turn(turn_id: str, text: str, reply: str, at: float, reason: str = "completed") -> list[Json]:
    """A whole turn: context, prompt, assistant reply, outcome."""
    return [
        *prompt(turn_id, text, at),
        text_message(f"{turn_id}-reply", "assistant", reply, at + 0.5),
        outcome(turn_id, reason),
    ]


def settings(
    *,
    autonomy: str | None = "high",
    model: str = "custom:fake-local",
    interaction_mode: str = "auto",
    tags: Sequence[Json] = ({"name": "sdk", "metadata": {"language": "python"}},),
    **extra: Any,
) -> Json:
    out: Json = {
        "model": model,
        "reasoningEffort": "none",
        "interactionMode": interaction_mode,
        "tags": list(tags),
        **extra,
    }
    if autonomy is not None:
        out["autonomyLevel"] = autonomy
    return out


def jsonl(records: Iterable[Json]) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


def write_settings(path: Path, values: Json) -> None:
    """Write a settings file by rename, as Droid does (the directory's mtime moves)."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(values, indent=2))
    os.replace(temporary, path)


def write_session(
    factory_home: Path,
    *,
    session_id: str,
    cwd: str,
    title: str = "New Session",
    records: Sequence[Json] = (),
    settings_values: Json | None = None,
    header_extra: Json | None = None,
    legacy: bool = False,
    mtime: float | None = None,
) -> Path:
    """Write ``<id>.jsonl`` (+ ``<id>.settings.json`` unless ``settings_values`` is None).

    ``legacy`` puts the files directly in ``sessions/``. ``mtime`` (seconds since the epoch)
    is applied to the transcript. Returns the transcript path.
    """
    directory = factory_home / "sessions" if legacy else project_dir(factory_home, cwd)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{session_id}.jsonl"
    path.write_bytes(jsonl([header(session_id, title, cwd, **(header_extra or {})), *records]))
    if settings_values is not None:
        write_settings(directory / f"{session_id}.settings.json", settings_values)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def append(path: Path, records: Iterable[Json]) -> None:
    with open(path, "ab") as handle:
        handle.write(jsonl(records))


def rewrite_header(path: Path, **changes: Any) -> None:
    """Rewrite line 0 in place (same inode), as Droid does when the title changes."""
    data = path.read_bytes()
    first, _, rest = data.partition(b"\n")
    head = json.loads(first)
    head.update(changes)
    with open(path, "r+b") as handle:
        handle.write(json.dumps(head, separators=(",", ":")).encode() + b"\n" + rest)
        handle.truncate()
