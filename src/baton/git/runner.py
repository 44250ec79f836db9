"""A bounded, neutralised git subprocess: the only place :mod:`baton.git` runs git.

Why our own wrapper and not GitPython, pygit2 or dulwich:
- the safety sequences of ``../shared/reference/worktree-safety.md`` were measured against the
  git CLI (``merge-tree --write-tree``, ``merge --ff-only --no-overwrite-ignore``, ``worktree
  lock``/``remove``, ``stash push``); libgit2 (pygit2) and dulwich implement their own merge and
  checkout rules, which would invalidate those measurements;
- GitPython is a thin subprocess layer too, but keeps whole outputs in memory without a bound and
  hands the user's environment (``GIT_DIR``, ``GIT_INDEX_FILE``, ``GIT_CONFIG_PARAMETERS``) to git
  unchanged; we need each call bounded in time and bytes and isolated from those, which is most
  of what this module does.

Every call gets ``--no-optional-locks`` (read-only probes must not rewrite the index: §1.3, §5
of the reference) and ``-c`` options that neutralise the user's configuration where it changes
what our commands do (autostash, hooks, signing, submodule recursion, automatic gc). Hooks are
off for every command Baton runs: ``worktree add`` runs no ``post-checkout``, the fast-forward of
an integration runs no ``post-merge``, ``update-ref`` runs no ``reference-transaction`` hook.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from baton.git.errors import (
    GitCommandFailed,
    GitOutputTooLarge,
    GitTimedOut,
    UnsupportedGitVersion,
    bounded_text,
)

#: ``-c`` options passed before every subcommand. Each line says what it defuses.
NEUTRALISING_CONFIG: tuple[str, ...] = (
    "core.hooksPath=/dev/null",  # no hook of the user's runs inside our steps
    "core.fsmonitor=false",  # no fsmonitor daemon started from our calls
    "merge.autostash=false",  # §2.1 A7: autostash hid the user's edit in stash@{0}
    "rebase.autostash=false",
    "merge.verifySignatures=false",  # our own merge commit is unsigned
    "commit.gpgSign=false",  # commit-tree would otherwise call gpg (and may prompt)
    "log.showSignature=false",  # log would otherwise call gpg
    "submodule.recurse=false",  # the fast-forward must not touch submodule checkouts
    "gc.auto=0",  # no automatic gc (it also prunes worktrees) inside our steps
    "maintenance.auto=false",
    "branch.autoSetupMerge=false",  # worktree add -b: no upstream tracking
    "worktree.guessRemote=false",
    "color.ui=false",
    "core.quotePath=false",
)

#: Inherited ``GIT_*`` variables that may stay: they pick the user's config files and identity.
#: Everything else (``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_INDEX_FILE``, ``GIT_CONFIG_PARAMETERS``,
#: ``GIT_OBJECT_DIRECTORY``…) would redirect our commands and is removed.
_KEPT_GIT_VARS = frozenset(
    {
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_EXEC_PATH",
    }
)

_FIXED_ENV = {
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_MERGE_AUTOEDIT": "no",
    "GIT_EDITOR": "true",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "LC_ALL": "C",
    "LANGUAGE": "C",
}

#: Default bounds of one call.
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_STDOUT = 64 * 1024 * 1024
MAX_STDERR = 64 * 1024
_CHUNK = 65536

#: ``merge-tree --write-tree`` appeared in git 2.38 (reference §1.5).
MERGE_TREE_MIN = (2, 38)
_VERSION = re.compile(r"^git version (\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class GitResult:
    """What one git call produced.

    ``stdout`` holds at most the call's bound (bytes); ``stdout_truncated`` says whether more was
    printed and discarded. ``stderr`` holds at most 64 KiB.
    """

    argv: tuple[str, ...]
    exit_status: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool

    @property
    def out(self) -> str:
        """stdout decoded (undecodable bytes kept as surrogate escapes), trailing newline cut."""
        return os.fsdecode(self.stdout).rstrip("\n")

    @property
    def err(self) -> str:
        """stderr decoded and bounded (what errors and reports carry)."""
        return bounded_text(self.stderr)

    def fields(self) -> list[str]:
        """stdout split on NUL (for ``-z`` output), the empty tail dropped."""
        parts = os.fsdecode(self.stdout).split("\0")
        if parts and parts[-1] == "":
            parts.pop()
        return parts


@dataclass(frozen=True)
class GitVersion:
    """A parsed ``git version`` line: ``(major, minor, patch)`` and the raw text."""

    major: int
    minor: int
    patch: int
    text: str

    @property
    def tuple(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def parse_git_version(text: str) -> GitVersion:
    """Parse ``git version 2.39.5`` (vendor suffixes such as ``(Apple Git-154)`` allowed).

    Raises
    ------
    UnsupportedGitVersion
        If the text is not a git version line.
    """
    match = _VERSION.match(text.strip())
    if match is None:
        raise UnsupportedGitVersion(f"cannot read the git version from {text.strip()[:200]!r}")
    major, minor, patch = match.groups()
    return GitVersion(int(major), int(minor), int(patch or 0), text.strip())


def git_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git call: ``base`` (default ``os.environ``) without the
    ``GIT_*`` variables that redirect git, plus fixed settings (no prompts, no pager, no
    optional locks, C locale so git's messages are stable English)."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("GIT_") or k in _KEPT_GIT_VARS}
    env.update(_FIXED_ENV)
    return env


class Git:
    """Runs git with bounded time and output and neutralised configuration.

    Thread-safe: each call is its own subprocess; only the version cache is shared.

    Parameters
    ----------
    executable:
        Path or name of git (default: ``git`` on ``PATH``, resolved once here).
    timeout_s:
        Default time bound of one call, seconds. A call past it is killed with its process
        group and raises :class:`GitTimedOut`.
    env:
        Base environment (default ``os.environ``), filtered by :func:`git_environment`.

    Raises
    ------
    FileNotFoundError
        If git cannot be found.
    """

    def __init__(
        self,
        executable: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
    ) -> None:
        found = shutil.which(executable or "git")
        if found is None:
            raise FileNotFoundError(f"git executable not found: {executable or 'git'}")
        self.executable = found
        self.timeout_s = timeout_s
        self._env = git_environment(env)
        self._version: GitVersion | None = None
        self._version_lock = threading.Lock()

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        *args: str,
        cwd: Path | str,
        git_dir: str | None = None,
        ok: Iterable[int] = (0,),
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        index_file: str | None = None,
        max_stdout: int = DEFAULT_MAX_STDOUT,
        complete: bool = True,
        cut: bool = False,
        timeout_s: float | None = None,
    ) -> GitResult:
        """Run ``git <neutralising options> <args>`` in ``cwd`` and return its result.

        Parameters
        ----------
        git_dir:
            Passed as ``--git-dir`` (repository-level plumbing runs against the common dir
            directly, so it needs no worktree and never depends on discovery from ``cwd``).
        ok:
            Exit statuses that are answers rather than failures (e.g. ``(0, 1)`` for
            ``merge-base --is-ancestor``).
        input:
            Bytes written to stdin (default: stdin is ``/dev/null``).
        env:
            Extra environment (e.g. a committer identity).
        index_file:
            ``GIT_INDEX_FILE`` for this call: an index of the caller's instead of the
            repository's (the working-tree diff works on a copy, so the user's index is never
            written). The user's own ``GIT_INDEX_FILE`` is never passed on.
        max_stdout:
            Bytes of stdout kept; the rest is read and discarded.
        complete:
            If True, output past ``max_stdout`` raises :class:`GitOutputTooLarge` (for output
            that is parsed as a whole); if False it is truncated and flagged.
        cut:
            If True, reaching ``max_stdout`` or the time bound stops git at once (its process
            group is killed) and the output read so far is returned with ``stdout_truncated``
            set, its exit status unchecked: for output shown to a person (a diff), where the
            head is worth having and the rest is not worth waiting for. ``complete`` is then
            ignored.

        Raises
        ------
        GitCommandFailed
            Exit status not in ``ok`` (carries git's stderr), or git could not be started
            (e.g. ``cwd`` no longer exists).
        GitTimedOut, GitOutputTooLarge
            As described above.
        """
        argv = ["--no-optional-locks"]
        for item in NEUTRALISING_CONFIG:
            argv += ["-c", item]
        if git_dir is not None:
            argv.append(f"--git-dir={git_dir}")
        argv += list(args)
        full_env = dict(self._env)
        if env:
            full_env.update(env)
        if index_file is not None:
            full_env["GIT_INDEX_FILE"] = index_file
        timeout = self.timeout_s if timeout_s is None else timeout_s
        try:
            status, out, err, truncated, timed_out = _bounded_call(
                [self.executable, *argv], Path(cwd), full_env, input, timeout, max_stdout, cut
            )
        except OSError as exc:  # e.g. cwd vanished: report it like a git failure
            raise GitCommandFailed(
                args, -1, str(exc), f"cannot run git {' '.join(args[:4])} in {cwd}: {exc}"
            ) from exc
        if cut and (truncated or timed_out):
            return GitResult(tuple(args), status, out, err, True)
        if timed_out:
            raise GitTimedOut(args, -9, err, f"git {' '.join(args[:4])} timed out after {timeout}s")
        result = GitResult(tuple(args), status, out, err, truncated)
        if truncated and complete:
            raise GitOutputTooLarge(
                args, status, err, f"git {' '.join(args[:4])} printed more than {max_stdout} bytes"
            )
        if status not in tuple(ok):
            raise GitCommandFailed(args, status, err)
        return result

    def out(self, *args: str, cwd: Path | str, git_dir: str | None = None) -> str:
        """stdout of a call that must succeed, decoded, trailing newline cut."""
        return self.run(*args, cwd=cwd, git_dir=git_dir).out

    # -- version ---------------------------------------------------------------------------

    def version(self) -> GitVersion:
        """The installed git's version (asked once per :class:`Git`)."""
        with self._version_lock:
            if self._version is None:
                self._version = parse_git_version(self.run("version", cwd="/").out)
            return self._version

    def require(self, minimum: tuple[int, int], feature: str) -> GitVersion:
        """The version, or :class:`UnsupportedGitVersion` if it is below ``minimum``."""
        version = self.version()
        if (version.major, version.minor) < minimum:
            raise UnsupportedGitVersion(
                f"unsupported git version {version}: {feature} needs git "
                f"{minimum[0]}.{minimum[1]} or newer",
                gitVersion=str(version),
                required=f"{minimum[0]}.{minimum[1]}",
            )
        return version


def _bounded_call(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    stdin: bytes | None,
    timeout_s: float,
    max_stdout: int,
    stop_when_full: bool = False,
) -> tuple[int, bytes, bytes, bool, bool]:
    """Run ``argv``; return ``(status, stdout, stderr, stdout_truncated, timed_out)``.

    Reads both pipes in this thread with a selector so neither can fill and stall git, keeps
    at most ``max_stdout`` / :data:`MAX_STDERR` bytes, and on the deadline (or, with
    ``stop_when_full``, once stdout passed ``max_stdout``) kills the process group (git runs
    its helpers in its group: ``start_new_session`` makes ours separate).
    """
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    out, err = bytearray(), bytearray()
    truncated = False
    timed_out = False
    stop = False
    pending = memoryview(stdin) if stdin is not None else None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
        while sel.get_map() and not stop:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in sel.select(remaining):
                if key.data == "in":
                    assert proc.stdin is not None and pending is not None
                    try:
                        written = os.write(proc.stdin.fileno(), pending[:_CHUNK])
                    except BrokenPipeError:
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if key.data == "out":
                    room = max_stdout - len(out)
                    if len(chunk) > room:
                        truncated = True
                        stop = stop_when_full
                    out += chunk[: max(room, 0)]
                else:
                    err += chunk[: max(MAX_STDERR - len(err), 0)]
    if timed_out or stop:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            stream.close()
    status = proc.wait()
    return status, bytes(out), bytes(err), truncated, timed_out
