"""The working-tree diff for ``droid_result``: ``git diff HEAD`` plus files git does not track yet.

Contract: ``shared/spec/droid-mcp.md`` (``droid_result`` with ``include: ["diff"]``; diffs only for
a cwd inside the approved roots, after ``realpath``) and WAVE2 §7.7 (``GIT_OPTIONAL_LOCKS=0``, a
size cap). The contract's plain ``git -C <cwd> diff HEAD`` misses every file the agent created,
so new files are shown as well, without touching the user's index:

1. the index is copied to a temporary file and ``GIT_INDEX_FILE`` points at the copy;
2. untracked, non-ignored files are added there with ``git add --intent-to-add``;
3. ``git diff HEAD`` runs against the copy, then the copy is deleted.

Each git call runs with ``GIT_OPTIONAL_LOCKS=0``, no external diff or textconv drivers and no
fsmonitor, so user configuration cannot make it run other programs. Binary files appear as git's
one-line ``Binary files ... differ`` summary and are listed in ``files``.
"""

from __future__ import annotations

import codecs
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from baton.errors import BatonError
from baton.paths import is_within
from baton.text import shown

#: Bytes of diff text kept; beyond it the diff is cut (``truncated``) at a UTF-8 boundary.
DIFF_MAX_BYTES = 1024 * 1024
#: Untracked files added to the temporary index at most (the rest are counted, not shown).
MAX_NEW_FILES = 2000
#: Files listed in ``files`` at most.
MAX_FILES_LISTED = 500
#: Seconds for the whole diff, all git calls together.
DIFF_TIMEOUT_S = 30.0
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # `git hash-object -t tree /dev/null`

DiffState = Literal["ok", "not_git"]
Json = dict[str, Any]


@dataclass(frozen=True)
class DiffFile:
    """One changed file: ``added``/``deleted`` line counts are None for a binary file."""

    path: str
    added: int | None
    deleted: int | None
    untracked: bool

    @property
    def binary(self) -> bool:
        return self.added is None

    def to_json(self) -> Json:
        """``{path, added, deleted, binary, new}``."""
        return {
            "path": self.path,
            "added": self.added,
            "deleted": self.deleted,
            "binary": self.binary,
            "new": self.untracked,
        }


@dataclass(frozen=True)
class WorkspaceDiff:
    """The diff of one working tree against ``HEAD``.

    ``state`` is ``not_git`` (``text`` empty, ``repo`` None) when the cwd is in no git working
    tree. ``text`` is git's output up to ``max_bytes`` bytes, cut on a character boundary
    (``truncated`` when cut, by size or by the time limit; bytes that are not UTF-8 read as
    U+FFFD). ``files``
    lists at most :data:`MAX_FILES_LISTED` changed files; ``untracked_omitted`` counts new
    files beyond :data:`MAX_NEW_FILES` that were left out of the diff.
    """

    state: DiffState
    cwd: str
    repo: str | None
    text: str
    truncated: bool
    files: tuple[DiffFile, ...]
    untracked_omitted: int


class _GitFailed(Exception):
    pass


def workspace_diff(
    cwd: str, roots: Iterable[str], *, max_bytes: int = DIFF_MAX_BYTES
) -> WorkspaceDiff:
    """``git diff HEAD`` of the working tree holding ``cwd``, new files included.

    The diff covers the whole repository (as ``git -C <cwd> diff HEAD`` does), against the
    empty tree when the repository has no commit yet. The user's index, refs and working tree
    are not written.

    Raises
    ------
    BatonError
        ``invalid_argument`` if ``cwd`` is not absolute or ``max_bytes < 1``;
        ``workspace_not_approved`` if it is missing, not a directory, or its realpath is outside
        every root (each root is resolved with ``realpath`` too); ``internal_error`` if git fails
        or its preparatory calls use up the 30 s limit (the patch itself is cut at the limit).
    """
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or "\x00" in cwd:
        raise BatonError("invalid_argument", "cwd must be an absolute path")
    if max_bytes < 1:
        raise BatonError("invalid_argument", "max_bytes must be at least 1")
    real = os.path.realpath(cwd)
    approved = [os.path.realpath(root) for root in roots]
    if not os.path.isdir(real):
        raise BatonError("workspace_not_approved", f"cwd {shown(cwd)!r} is not a directory")
    if not any(is_within(real, root) for root in approved):
        raise BatonError(
            "workspace_not_approved",
            f"cwd {shown(cwd)!r} resolves to {shown(real)!r}, outside the approved roots; "
            "no diff is shown for it",
        )
    deadline = time.monotonic() + DIFF_TIMEOUT_S
    try:
        return _diff(real, max_bytes, deadline)
    except _GitFailed as exc:
        raise BatonError("internal_error", f"git diff failed in {shown(real)!r}: {exc}") from None


def _env(index_file: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    if index_file is not None:
        env["GIT_INDEX_FILE"] = index_file
    return env


#: Options for every git call: no fsmonitor hook, no pager, no colour, no quoting of names.
_GIT = ["git", "-c", "core.fsmonitor=false", "-c", "core.quotepath=off", "--no-pager"]


def _git(
    repo: str,
    args: Sequence[str],
    deadline: float,
    *,
    index_file: str | None = None,
    stdin: bytes | None = None,
    ok: tuple[int, ...] = (0,),
) -> bytes:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _GitFailed("timed out")
    try:
        done = subprocess.run(
            [*_GIT, "-C", repo, *args],
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            env=_env(index_file),
            timeout=remaining,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _GitFailed("timed out") from None
    except OSError as exc:
        raise _GitFailed(f"cannot run git: {exc.strerror}") from None
    if done.returncode not in ok:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _GitFailed(message[-1][:300] if message else f"exit {done.returncode}")
    return done.stdout


def _diff(cwd: str, max_bytes: int, deadline: float) -> WorkspaceDiff:
    try:
        probe = subprocess.run(
            [*_GIT, "-C", cwd, "rev-parse", "--show-toplevel", "--absolute-git-dir"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=_env(),
            timeout=max(deadline - time.monotonic(), 0.1),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _GitFailed("timed out") from None
    except OSError as exc:
        raise _GitFailed(f"cannot run git: {exc.strerror}") from None
    lines = probe.stdout.decode("utf-8", "surrogateescape").splitlines()
    if probe.returncode != 0 or len(lines) != 2:
        return WorkspaceDiff("not_git", cwd, None, "", False, (), 0)
    repo, git_dir = lines
    has_head = (
        _git(repo, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], deadline, ok=(0, 1))
        != b""
    )
    base = "HEAD" if has_head else _EMPTY_TREE
    scratch = tempfile.mkdtemp(prefix="baton-diff-")
    try:
        index_copy = os.path.join(scratch, "index")
        user_index = os.path.join(git_dir, "index")
        if os.path.exists(user_index):
            shutil.copyfile(user_index, index_copy)
        elif has_head:
            _git(repo, ["read-tree", "HEAD"], deadline, index_file=index_copy)
        listed = _git(
            repo,
            ["ls-files", "-z", "--others", "--exclude-standard"],
            deadline,
            index_file=index_copy,
        )
        new_files = [p for p in listed.split(b"\0") if p]
        added = new_files[:MAX_NEW_FILES]
        if added:
            _git(
                repo,
                ["add", "--intent-to-add", "--pathspec-from-file=-", "--pathspec-file-nul", "--"],
                deadline,
                index_file=index_copy,
                stdin=b"\0".join(added),
            )
        common = ["diff", base, "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames"]
        numstat = _git(repo, [*common, "--numstat", "-z"], deadline, index_file=index_copy)
        text, truncated = _bounded_diff(repo, common, index_copy, max_bytes, deadline)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    new_set = {os.fsdecode(p) for p in added}
    return WorkspaceDiff(
        state="ok",
        cwd=cwd,
        repo=repo,
        text=text,
        truncated=truncated,
        files=tuple(_numstat(numstat, new_set))[:MAX_FILES_LISTED],
        untracked_omitted=len(new_files) - len(added),
    )


def _bounded_diff(
    repo: str, common: list[str], index_file: str, max_bytes: int, deadline: float
) -> tuple[str, bool]:
    """The patch, read up to ``max_bytes`` (+1 to know it was cut); git is stopped after."""
    process = subprocess.Popen(
        [*_GIT, "-C", repo, *common],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(index_file),
    )
    assert process.stdout is not None
    chunks: list[bytes] = []
    size = 0
    finished = False
    try:
        while size <= max_bytes:
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([process.stdout], [], [], max(remaining, 0))
            if not readable:
                break  # the deadline passed while git was still working
            chunk = os.read(process.stdout.fileno(), 64 * 1024)
            if not chunk:
                finished = True
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        if not finished:
            process.kill()  # our own child, by its pid: the rest of its output is not wanted
        process.stdout.close()
        try:
            code = process.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
    if finished and code != 0:
        raise _GitFailed(f"git diff exited {code}")
    data = b"".join(chunks)[:max_bytes]
    # Not final: a sequence cut at the end is held back, invalid bytes elsewhere are replaced.
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=finished)
    return text, not finished


def _numstat(output: bytes, new_files: set[str]) -> list[DiffFile]:
    """Parse ``git diff --numstat -z`` (a rename is ``a\\td\\t\\0old\\0new\\0``)."""
    out: list[DiffFile] = []
    fields = output.split(b"\0")
    i = 0
    while i < len(fields) and fields[i]:
        added, deleted, path = fields[i].split(b"\t", 2)
        if not path:  # rename or copy: the two names follow
            path = fields[i + 2]
            i += 3
        else:
            i += 1
        name = os.fsdecode(path)
        binary = added == b"-"
        out.append(
            DiffFile(
                path=name,
                added=None if binary else int(added),
                deleted=None if binary else int(deleted),
                untracked=name in new_files,
            )
        )
    return out
