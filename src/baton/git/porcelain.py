"""Parsers for git's machine-readable (``-z``) outputs that :mod:`baton.git` reads.

Formats as observed on git 2.39.5 (``../shared/reference/worktree-safety.md`` §1.2, §4.1).
All paths come from NUL-separated output, so they are never quoted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def is_oid(text: str) -> bool:
    """True for a full SHA-1 (40 hex) or SHA-256 (64 hex) object id."""
    return bool(_OID.match(text))


# --------------------------------------------------------------------------------------------
# git worktree list --porcelain -z


@dataclass(frozen=True)
class WorktreeEntry:
    """One entry of ``git worktree list --porcelain -z``.

    ``branch`` is the full ref (``refs/heads/x``) or None when detached or bare; ``locked`` and
    ``prunable`` are the reason text ("" when given without one) or None when absent.
    """

    path: str
    head: str | None
    branch: str | None
    bare: bool
    detached: bool
    locked: str | None
    prunable: str | None


def parse_worktree_list(fields: Sequence[str]) -> list[WorktreeEntry]:
    """Entries of ``worktree list --porcelain -z`` split on NUL (an empty field ends each).

    The first entry is always the main worktree (git's documented order).
    """
    entries: list[WorktreeEntry] = []
    current: dict[str, str] = {}

    def flush() -> None:
        if "worktree" in current:
            entries.append(
                WorktreeEntry(
                    path=current["worktree"],
                    head=current.get("HEAD"),
                    branch=current.get("branch"),
                    bare="bare" in current,
                    detached="detached" in current,
                    locked=current.get("locked"),
                    prunable=current.get("prunable"),
                )
            )
        current.clear()

    for field in fields:
        if field == "":
            flush()
            continue
        key, _, value = field.partition(" ")
        current[key] = value
    flush()
    return entries


# --------------------------------------------------------------------------------------------
# git status --porcelain=v2 -z --untracked-files=all


@dataclass(frozen=True)
class ChangedFile:
    """One path of ``status --porcelain=v2``.

    ``xy`` is git's two-letter code (index, worktree; ``.`` = unchanged, ``?`` = untracked,
    ``U`` = unmerged); ``orig_path`` is the source of a rename or copy.
    """

    path: str
    xy: str
    orig_path: str | None = None

    @property
    def untracked(self) -> bool:
        return self.xy == "??"

    @property
    def staged(self) -> bool:
        return self.xy[0] not in ".?"

    @property
    def unstaged(self) -> bool:
        return self.xy[1] not in ".?"

    @property
    def unmerged(self) -> bool:
        return self.xy[0] == "U" or self.xy[1] == "U" or self.xy in ("AA", "DD")

    def to_json(self) -> dict[str, Any]:
        """``{path, status, origPath?}`` (``status`` is git's XY code)."""
        body: dict[str, Any] = {"path": self.path, "status": self.xy}
        if self.orig_path is not None:
            body["origPath"] = self.orig_path
        return body


def parse_status_v2(fields: Sequence[str]) -> list[ChangedFile]:
    """Changed paths of ``status --porcelain=v2 -z`` (header lines ``#`` and ignored ``!``
    entries are skipped). A rename record is followed by a field holding its source path."""
    changes: list[ChangedFile] = []
    index = 0
    while index < len(fields):
        record = fields[index]
        index += 1
        kind = record[:1]
        if kind == "1":
            parts = record.split(" ", 8)
            changes.append(ChangedFile(parts[8], parts[1]))
        elif kind == "2":
            parts = record.split(" ", 9)
            orig = fields[index] if index < len(fields) else None
            index += 1
            changes.append(ChangedFile(parts[9], parts[1], orig))
        elif kind == "u":
            parts = record.split(" ", 10)
            changes.append(ChangedFile(parts[10], parts[1]))
        elif kind == "?":
            changes.append(ChangedFile(record[2:], "??"))
    return changes


# --------------------------------------------------------------------------------------------
# git merge-tree --write-tree -z --messages


@dataclass(frozen=True)
class ConflictMessage:
    """One informational or conflict message of ``merge-tree``: its paths, type and text."""

    paths: tuple[str, ...]
    type: str
    text: str

    @property
    def is_conflict(self) -> bool:
        # 2.39.5 spells one type "CONFLICT(directory rename unclear split)" with no space.
        return self.type.startswith("CONFLICT")

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "paths": list(self.paths), "text": self.text.strip()}


@dataclass(frozen=True)
class MergeTreeOutput:
    """``merge-tree --write-tree -z`` stdout: the tree, conflicted entry paths and messages."""

    tree: str
    conflicted_paths: tuple[str, ...]
    messages: tuple[ConflictMessage, ...]


def parse_merge_tree(fields: Sequence[str], conflicted: bool) -> MergeTreeOutput | None:
    """Parse ``merge-tree --write-tree -z --messages`` split on NUL.

    Layout (reference §1.2): ``OID``; when ``conflicted``, then entries ``<mode> <oid>
    <stage>\\t<path>``, an empty field, and messages ``<N>, N paths, <type>, <text>``.
    Returns None if the first field is not an object id (not merge-tree's output: an older git,
    or an error), which the caller treats as an error, never as an answer.
    """
    if not fields or not is_oid(fields[0]):
        return None
    tree = fields[0]
    if not conflicted:
        return MergeTreeOutput(tree, (), ())
    index = 1
    paths: list[str] = []
    while index < len(fields) and fields[index] != "":
        _, _, path = fields[index].partition("\t")
        paths.append(path)
        index += 1
    index += 1  # the empty field that opens the message section
    messages: list[ConflictMessage] = []
    while index < len(fields):
        try:
            count = int(fields[index])
        except ValueError:
            break
        end = index + 1 + count
        if end + 1 >= len(fields):
            break  # truncated record: keep what was complete
        msg_paths = tuple(fields[index + 1 : end])
        kind, text = fields[end], fields[end + 1]
        index = end + 2
        messages.append(ConflictMessage(msg_paths, kind, text))
    return MergeTreeOutput(tree, tuple(paths), tuple(messages))
