"""The working-tree diff for ``droid_result``: ``git diff HEAD`` plus files git does not track yet.

Contract: ``shared/spec/droid-mcp.md`` (``droid_result`` with ``include: ["diff"]``; diffs only for
a cwd inside the approved roots, after ``realpath``) and WAVE2 §7.7 (``GIT_OPTIONAL_LOCKS=0``, a
size cap). The contract's plain ``git -C <cwd> diff HEAD`` misses every file the agent created,
so new files are shown as well, without touching the user's index:

1. the index is copied to a temporary file and ``GIT_INDEX_FILE`` points at the copy;
2. untracked, non-ignored files are added there with ``git add --intent-to-add``;
3. ``git diff HEAD`` runs against the copy, then the copy is deleted.

Each git call goes through :class:`baton.git.runner.Git` (the one runner: neutralised
environment and config, ``GIT_OPTIONAL_LOCKS=0`` and ``--no-optional-locks``, no hooks, no
fsmonitor, bounded time and output); the diff itself also runs with ``--no-ext-diff
--no-textconv``, and every filter driver the repository's own configuration defines (``local``
or ``worktree`` scope, includes counted) is emptied for these calls: git would otherwise run its
``clean`` command on each changed file it reads. So a repository (which an agent may write)
cannot make the diff run a program; drivers of the user's own configuration (git-lfs) still
apply. The patch is read up
to the size cap, then git is stopped. Binary files appear as git's one-line ``Binary files ...
differ`` summary and are listed in ``files``.
"""

from __future__ import annotations

import codecs
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from baton.errors import BatonError
from baton.git.errors import GitCommandFailed, GitTimedOut, WorktreeError
from baton.git.runner import DEFAULT_MAX_STDOUT, Git, GitResult
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
#: ``GIT_CONFIG_COUNT`` (how the filter drivers are emptied) appeared in git 2.31.
CONFIG_ENV_GIT = (2, 31)
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
    cwd: str, roots: Iterable[str], *, max_bytes: int = DIFF_MAX_BYTES, git: Git | None = None
) -> WorkspaceDiff:
    """``git diff HEAD`` of the working tree holding ``cwd``, new files included.

    The diff covers the whole repository (as ``git -C <cwd> diff HEAD`` does), against the
    empty tree when the repository has no commit yet. The user's index, refs and working tree
    are not written. ``git`` is the runner to use (default: ``git`` on ``PATH``).

    Raises
    ------
    BatonError
        ``invalid_argument`` if ``cwd`` is not absolute or ``max_bytes < 1``;
        ``workspace_not_approved`` if it is missing, not a directory, or its realpath is outside
        every root (each root is resolved with ``realpath`` too); ``internal_error`` if git fails
        or its preparatory calls use up the 30 s limit (the patch itself is cut at the limit),
        cannot be found or is older than 2.31.
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
        runner = git or _default_git()
        runner.require(CONFIG_ENV_GIT, "the working-tree diff (GIT_CONFIG_COUNT)")
        return _Diff(runner, deadline).run(real, max_bytes)
    except (_GitFailed, FileNotFoundError, WorktreeError) as exc:
        raise BatonError("internal_error", f"git diff failed in {shown(real)!r}: {exc}") from None


@functools.cache
def _default_git() -> Git:
    """``git`` on ``PATH``, looked up once (with its version); not found is not remembered."""
    return Git()


class _Diff:
    """The git calls of one diff, all within one deadline (``time.monotonic()`` seconds)."""

    def __init__(self, git: Git, deadline: float) -> None:
        self.git = git
        self.deadline = deadline
        self.env: dict[str, str] = {}
        """Configuration of every call, as ``GIT_CONFIG_*`` variables (the emptied filter
        drivers; variables keep a key apart from its value, whatever a driver is named)."""

    def call(
        self,
        repo: str,
        *args: str,
        index_file: str | None = None,
        stdin: bytes | None = None,
        ok: Iterable[int] = (0,),
        cut_at: int | None = None,
    ) -> GitResult:
        """One git call in ``repo`` with the time left; ``cut_at``: keep that many bytes of
        stdout, and stop git past them or at the deadline (the result says it was cut)."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise _GitFailed("timed out")
        try:
            return self.git.run(
                *args,
                env=self.env,
                cwd=repo,
                index_file=index_file,
                input=stdin,
                ok=ok,
                timeout_s=remaining,
                max_stdout=DEFAULT_MAX_STDOUT if cut_at is None else cut_at,
                cut=cut_at is not None,
            )
        except GitTimedOut:
            raise _GitFailed("timed out") from None
        except GitCommandFailed as exc:
            if exc.exit_status == -1:  # git could not be started
                raise _GitFailed(f"cannot run git: {exc.stderr}") from None
            lines = exc.stderr.strip().splitlines()
            raise _GitFailed(lines[-1][:300] if lines else f"exit {exc.exit_status}") from None

    def run(self, cwd: str, max_bytes: int) -> WorkspaceDiff:
        # Any exit status is an answer here: a failing rev-parse means no working tree.
        probe = self.call(cwd, "rev-parse", "--show-toplevel", "--absolute-git-dir", ok=range(256))
        lines = os.fsdecode(probe.stdout).splitlines()
        if probe.exit_status != 0 or len(lines) != 2:
            return WorkspaceDiff("not_git", cwd, None, "", False, (), 0)
        repo, git_dir = lines
        drivers = self.call(
            repo, "config", "-z", "--show-scope", "--get-regexp", r"^filter\.", ok=(0, 1)
        )
        self.env = _emptied_filters(os.fsdecode(drivers.stdout))
        verify = self.call(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", ok=(0, 1))
        has_head = verify.stdout != b""
        base = "HEAD" if has_head else _EMPTY_TREE
        scratch = tempfile.mkdtemp(prefix="baton-diff-")
        try:
            index = os.path.join(scratch, "index")
            user_index = os.path.join(git_dir, "index")
            if os.path.exists(user_index):
                shutil.copyfile(user_index, index)
            elif has_head:
                self.call(repo, "read-tree", "HEAD", index_file=index)
            listed = self.call(
                repo, "ls-files", "-z", "--others", "--exclude-standard", index_file=index
            )
            new_files = [p for p in listed.stdout.split(b"\0") if p]
            added = new_files[:MAX_NEW_FILES]
            if added:
                self.call(
                    repo,
                    *("add", "--intent-to-add", "--pathspec-from-file=-", "--pathspec-file-nul"),
                    "--",
                    index_file=index,
                    stdin=b"\0".join(added),
                )
            common = [
                *("diff", base, "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames")
            ]
            numstat = self.call(repo, *common, "--numstat", "-z", index_file=index)
            patch = self.call(repo, *common, index_file=index, cut_at=max_bytes)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        # Not final when cut: a sequence cut at the end is held back; invalid bytes elsewhere
        # are replaced.
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(patch.stdout, final=not patch.stdout_truncated)
        new_set = {os.fsdecode(p) for p in added}
        return WorkspaceDiff(
            state="ok",
            cwd=cwd,
            repo=repo,
            text=text,
            truncated=patch.stdout_truncated,
            files=tuple(_numstat(numstat.stdout, new_set))[:MAX_FILES_LISTED],
            untracked_omitted=len(new_files) - len(added),
        )


def _emptied_filters(listing: str) -> dict[str, str]:
    r"""Configuration (``GIT_CONFIG_COUNT``/``_KEY_<n>``/``_VALUE_<n>``) that empties every
    filter driver ``git config -z --show-scope --get-regexp ^filter\.`` lists from the
    repository's own scopes (``local``, ``worktree``): empty ``clean``/``smudge``/``process``
    commands are no filter, and ``required=false`` keeps a required driver from failing the
    diff. A driver's name may hold dots, spaces or ``=`` (``filter.a b.clean``)."""
    fields = listing.split("\0")
    names: set[str] = set()
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        key = entry.split("\n", 1)[0]
        if scope in ("local", "worktree") and key.startswith("filter.") and key.count(".") >= 2:
            names.add(key[len("filter.") :].rsplit(".", 1)[0])
    settings = [
        (f"filter.{name}.{var}", value)
        for name in sorted(names)
        for var, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
    ]
    env = {"GIT_CONFIG_COUNT": str(len(settings))} if settings else {}
    for number, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{number}"] = key
        env[f"GIT_CONFIG_VALUE_{number}"] = value
    return env


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
