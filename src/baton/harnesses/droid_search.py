"""Full-text search of Droid transcripts for ``droid_find`` with ``content: true``.

The contract (``shared/spec/droid-mcp.md``, ``droid_find``) searches transcripts with ``rg -F``
and a 40 s timeout; the query is a literal, never a regular expression. ``rg`` is taken from
``PATH``, else the copy Droid extracts to ``~/.factory/bin/rg`` (WAVE2 §4.1; it appears once a
session has used Droid's Grep tool), else a pure-Python scan does the same literal,
case-insensitive match.

Transcripts are JSON lines, so a query with quotes, backslashes or control characters is stored
escaped; both the raw and the JSON-escaped spellings are searched.
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from baton.regular_files import open_regular

#: The contract's timeout for a content search, seconds.
SEARCH_TIMEOUT_S = 40.0
#: Bytes of file names passed to one ``rg`` process (well under Linux's 2 MiB argv limit).
_ARGV_BUDGET = 96 * 1024
_CHUNK = 1 << 20

Engine = Literal["rg", "python"]


@dataclass(frozen=True)
class SearchResult:
    """Which of the given files contain the query.

    ``complete`` is False when the timeout stopped the search (``matches`` then holds what was
    found before it); ``engine`` says which search ran.
    """

    matches: frozenset[str]
    complete: bool
    engine: Engine


def find_rg(factory_home: Path) -> str | None:
    """``rg`` from ``PATH``, else ``<factory_home>/bin/rg`` if executable, else None."""
    on_path = shutil.which("rg")
    if on_path:
        return on_path
    bundled = factory_home / "bin" / "rg"
    return str(bundled) if os.access(bundled, os.X_OK) and bundled.is_file() else None


def spellings(query: str) -> list[str]:
    """The query as typed and, when different, as it appears inside a JSON string."""
    escaped = json.dumps(query, ensure_ascii=False)[1:-1]
    return [query] if escaped == query else [query, escaped]


class TranscriptSearch:
    """Literal, case-insensitive search over transcript files.

    Parameters
    ----------
    rg:
        Path of the ``rg`` binary; None forces the pure-Python scan. Use :func:`find_rg`.
    timeout_s:
        Budget for one :meth:`search` call, all batches together.
    """

    def __init__(self, rg: str | None, *, timeout_s: float = SEARCH_TIMEOUT_S) -> None:
        self.rg = rg
        self.timeout_s = timeout_s

    def search(self, query: str, paths: Sequence[str]) -> SearchResult:
        """The subset of ``paths`` containing ``query`` (literal, case-insensitive).

        Raises
        ------
        ValueError
            If ``query`` is empty.
        """
        if not query:
            raise ValueError("query must not be empty")
        if not paths:
            return SearchResult(frozenset(), True, "rg" if self.rg else "python")
        deadline = time.monotonic() + self.timeout_s
        if self.rg is not None:
            try:
                return self._rg(self.rg, query, paths, deadline)
            except OSError:
                pass  # not executable after all: the scan below gives the same answer
        return _scan(query, paths, deadline)

    def _rg(self, rg: str, query: str, paths: Sequence[str], deadline: float) -> SearchResult:
        argv = [
            rg,
            "--fixed-strings",
            "--files-with-matches",
            "--ignore-case",
            "--no-config",
            "--no-messages",
            "--no-ignore",
            "--hidden",
            "--null",
        ]
        for spelling in spellings(query):
            argv += ["-e", spelling]
        argv.append("--")
        found: set[str] = set()
        for batch in _batches(paths):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return SearchResult(frozenset(found), False, "rg")
            try:
                done = subprocess.run(
                    argv + batch,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=remaining,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:  # run() has killed and reaped rg
                found.update(_names(exc.output))
                return SearchResult(frozenset(found), False, "rg")
            found.update(_names(done.stdout))
        return SearchResult(frozenset(found), True, "rg")


def _names(output: bytes | str | None) -> list[str]:
    if not output:
        return []
    data = output if isinstance(output, bytes) else output.encode()
    parts = data.split(b"\0")
    if not data.endswith(b"\0"):
        parts = parts[:-1]  # a name cut off by the timeout
    return [os.fsdecode(p) for p in parts if p]


def _batches(paths: Sequence[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    used = 0
    for path in paths:
        size = len(os.fsencode(path)) + 1
        if out[-1] and used + size > _ARGV_BUDGET:
            out.append([])
            used = 0
        out[-1].append(path)
        used += size
    return out


def _scan(query: str, paths: Sequence[str], deadline: float) -> SearchResult:
    """Stream each file through a UTF-8 decoder and look for any case-folded spelling."""
    needles = [s.casefold() for s in spellings(query)]
    keep = max(len(n) for n in needles) - 1
    found: set[str] = set()
    for path in paths:
        if time.monotonic() > deadline:
            return SearchResult(frozenset(found), False, "python")
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        tail = ""
        try:
            with open_regular(path) as handle:  # a FIFO is skipped, never waited on
                while chunk := handle.read(_CHUNK):
                    text = tail + decoder.decode(chunk).casefold()
                    if any(n in text for n in needles):
                        found.add(path)
                        break
                    tail = text[-keep:] if keep else ""
                    if time.monotonic() > deadline:
                        return SearchResult(frozenset(found), False, "python")
        except OSError:
            continue
    return SearchResult(frozenset(found), True, "python")
