"""The agents' own session files: tailing them, and finding one turn in them.

Each agent TUI writes a JSONL transcript of its conversation (``shared/reference/tmux-agents.md``
§3, measured on Claude Code 2.1.332, Codex 0.171.0, Droid 0.225.2). Those files, not the screen,
say exactly when *our* turn ended and what the agent answered. This module holds what the three
have in common: :class:`JsonlTail` reads a transcript incrementally, and :class:`TurnTranscript`
finds the user record holding our prompt and the first done record after it. Each adapter supplies
where the files are (``candidates``) and what a record means (``digest`` → :class:`Rec`).

Why the care with offsets: Droid rewrites its transcript's *first* line in place when the session's
title changes, which moves every later byte; the shared tail (:mod:`baton.harnesses.jsonl`)
counts offsets from line 1, which that rewrite does not move.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from baton.harnesses.jsonl import Tail

Json = dict[str, Any]
RecKind = Literal["user", "text", "tool", "done"]
DoneKind = Literal["completed", "interrupted", "failed"]

#: A user record older than the turn's start by more than this is someone else's prompt (s).
_CLOCK_SLACK_S = 2.0


@dataclass(frozen=True, slots=True)
class Rec:
    """One transcript record, reduced to what turn tracking needs.

    ``user``: a prompt (``text``); ``text``: assistant answer text; ``tool``: a tool round trip
    (the answer so far was a preamble); ``done``: the end of a turn (``outcome``, ``reason``,
    and for Codex the final answer in ``text``). ``ref`` is the record's or turn's id where the
    agent links the two (Droid), ``ts`` its time (epoch seconds) when the record has one.
    """

    kind: RecKind
    text: str = ""
    ref: str = ""
    ts: float | None = None
    outcome: DoneKind | None = None
    reason: str = ""


def iso_time(value: object) -> float | None:
    """Epoch seconds of an ISO-8601 timestamp (``...Z`` accepted), or None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def normalize(text: str) -> str:
    """Whitespace runs collapsed to one space, ends stripped: the agents expand tabs (Claude) and
    strip trailing blanks (Codex, Droid) from a pasted prompt (measured), nothing else."""
    return " ".join(text.split())


def block_texts(content: object, kinds: Iterable[str] = ("text",)) -> list[str]:
    """The ``text`` of every block of ``content`` whose ``type`` is in ``kinds`` (a string
    ``content`` is one text block)."""
    if isinstance(content, str):
        return [content]
    wanted = set(kinds)
    out: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") in wanted:
                text = block.get("text")
                if isinstance(text, str):
                    out.append(text)
    return out


class JsonlTail:
    """New records of one JSONL file, digested, from a starting point on (over the shared
    :class:`baton.harnesses.jsonl.Tail`: streamed, each line bounded, following Droid's rewrite
    of line 0).

    Parameters
    ----------
    path
        The file (it may not exist yet).
    digest
        Maps one parsed line to a :class:`Rec`, or None to skip it. A line that is not a JSON
        object, or longer than :data:`~baton.harnesses.jsonl.MAX_RECORD_BYTES`, is skipped.
    from_end
        Start at the file's current end (records already there are not ours), else at its start.
    """

    def __init__(self, path: Path, digest: Callable[[Json], Rec | None], *, from_end: bool) -> None:
        self.path = path
        self.records: list[Rec] = []
        self._digest = digest
        self._tail = Tail(path, from_end=from_end)

    def poll(self) -> bool:
        """Read what was appended since the last poll; True if :attr:`records` changed. When
        the file no longer holds what was read (replaced, or rewritten past line 0) the
        records are rebuilt from the starting line on."""
        got = self._tail.poll()
        if got is None:
            return False
        changed = got.restarted
        if got.restarted:
            self.records = []
        for line in got.lines:
            value = line.value()
            if isinstance(value, dict):
                rec = self._digest(value)
                if rec is not None:
                    self.records.append(rec)
                    changed = True
        return changed


class FileRules(Protocol):
    """What an adapter knows about its agent's session files."""

    def candidates(self, ctx: FilesContext) -> list[Path]:
        """Transcripts that may hold the turn's records (cheap: called on every poll until the
        prompt is found)."""
        ...

    def digest(self, record: Json) -> Rec | None:
        """One parsed JSONL line as a :class:`Rec`, or None to ignore it."""
        ...

    def ends(self, prompt: Rec, done: Rec) -> bool:
        """Whether ``done`` ends the turn started by ``prompt``."""
        ...


@dataclass
class FilesContext:
    """Where one agent keeps its files: its HOME, its config directory (``~/.claude``,
    ``$CODEX_HOME``, ``~/.factory``), its working directory, and the pids of its process tree
    (the pane process and descendants). ``memo`` carries a found transcript from turn to turn."""

    home: Path
    config: Path
    cwd: str
    pids: Callable[[], list[int]]
    memo: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """What the files say about one turn so far."""

    accepted: bool
    """The agent recorded our prompt (delivery confirmed by the agent itself)."""
    done: Rec | None
    """The done record that ended the turn, if any."""
    answer: str
    """The agent's final answer text so far (after its last tool round trip)."""
    newer_prompt: bool
    """A later prompt (someone typed into the pane) follows the done record."""
    path: Path | None


class TurnTranscript:
    """Finds turn ``prompt`` in the agent's transcripts (see the module docstring)."""

    def __init__(self, rules: FileRules, ctx: FilesContext, prompt: str, since: float) -> None:
        self._rules = rules
        self._ctx = ctx
        self._needle = normalize(prompt)
        self._since = since - _CLOCK_SLACK_S
        self._tails = {p: JsonlTail(p, rules.digest, from_end=True) for p in rules.candidates(ctx)}
        self._locked: JsonlTail | None = None

    def poll(self) -> TurnFacts:
        """Read new records and return the turn's facts (never raises for missing files)."""
        if self._locked is None:
            for path in self._rules.candidates(self._ctx):
                if path not in self._tails:
                    self._tails[path] = JsonlTail(path, self._rules.digest, from_end=False)
            for tail in self._tails.values():
                tail.poll()
                if self._find(tail) is not None:
                    self._locked = tail
                    self._ctx.memo["transcript"] = str(tail.path)
                    break
            if self._locked is None:
                return TurnFacts(False, None, "", False, None)
        else:
            self._locked.poll()
        return self._facts(self._locked)

    def _find(self, tail: JsonlTail) -> int | None:
        for index, rec in enumerate(tail.records):
            if rec.kind != "user" or (rec.ts is not None and rec.ts < self._since):
                continue
            if self._needle in normalize(rec.text):
                return index
        return None

    def _facts(self, tail: JsonlTail) -> TurnFacts:
        start = self._find(tail)
        if start is None:  # the file was rewritten and our record is not (yet) back
            return TurnFacts(False, None, "", False, tail.path)
        prompt = tail.records[start]
        parts: list[str] = []
        done: Rec | None = None
        newer = False
        for rec in tail.records[start + 1 :]:
            if done is not None:
                newer = newer or rec.kind == "user"
                continue
            if rec.kind == "text":
                parts.append(rec.text)
            elif rec.kind == "tool":
                parts = []
            elif rec.kind == "done" and self._rules.ends(prompt, rec):
                done = rec
        answer = done.text if done is not None and done.text else "\n\n".join(parts)
        return TurnFacts(True, done, answer, newer, tail.path)
