"""The close's stash: the worktree's uncommitted work kept in a commit under Baton's own ref.

Steps of :func:`baton.git.close.close_worktree` (``../shared/reference/worktree-safety.md``
§3.2 B, §3.5), each rerun on every attempt while the worktree exists, because each looks at
the worktree as it is now:

``capture``          snapshot the work (:mod:`baton.git.snapshot`); when it equals the stash an
                     earlier attempt pinned, that stash is kept (a retry reports the same
                     commit and ref), else a new commit is pinned under
                     ``refs/baton/stash/<session>-<nonce8>-<content key>`` (create-only, so a
                     retry never repoints a pin) and the earlier one is reported superseded;
``verify_captured``  refuse while a changed path is not in the stash (a nested repository);
``remove`` guard     right before ``git worktree remove --force``, the worktree must still
                     equal the stash (:func:`still_captured`), else nothing is removed.

Why never ``git stash push``: ``refs/stash`` is one list for the whole repository, and an
entry there is what the user's own ``git stash pop`` takes next. Nothing here writes it.
"""

from __future__ import annotations

import os
import re
from typing import Any

from baton.git.errors import Refused, WorktreeError
from baton.git.journal import Journal
from baton.git.records import WorktreeRecord
from baton.git.repo import resolve_commit
from baton.git.runner import Git
from baton.git.snapshot import commit_snapshot, stash_trees, take_snapshot

#: Namespace of Baton's stash commits (one ref each; never ``refs/stash``).
STASH_PIN_PREFIX = "refs/baton/stash/"
#: Paths listed in a refusal (counts are exact).
LIST_LIMIT = 200


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:64] or "session"


def stash_message(record: WorktreeRecord, nonce: str) -> str:
    """``baton close session=<key> branch=<B> nonce=<nonce>`` (the stash commit's subject)."""
    return f"baton close session={record.session_key} branch={record.branch} nonce={nonce}"


def pin_ref(record: WorktreeRecord, nonce: str, key: str) -> str:
    """``refs/baton/stash/<session>-<nonce8>-<content key>``."""
    return f"{STASH_PIN_PREFIX}{_safe(record.session_key)}-{nonce[:8]}-{key}"


def find_stash_by_nonce(git: Git, record: WorktreeRecord, nonce: str) -> str | None:
    """The newest stash commit Baton pinned for ``nonce`` (its subject carries
    ``nonce=<nonce>``), or None. Reads ``refs/baton/stash/``, never ``refs/stash``."""
    common = record.common_dir
    listed = git.run(
        "for-each-ref", "--sort=-creatordate", "--format=%(objectname)%09%(subject)",
        f"{STASH_PIN_PREFIX}{_safe(record.session_key)}-{nonce[:8]}-*",
        cwd=common, git_dir=common,
    )  # fmt: skip
    for line in listed.out.split("\n"):
        sha, _, subject = line.partition("\t")
        if f"nonce={nonce}" in subject.split():
            return sha
    return None


def capture_stash(git: Git, record: WorktreeRecord, data: dict[str, Any]) -> dict[str, Any]:
    """The ``capture`` step of a stash close: ``{stash, supersededStashes, branchTip}``;
    ``stash`` is ``{sha, pinRef, message, nonce}`` or None (nothing to keep)."""
    tip = resolve_commit(git, record.common_dir, record.branch_ref)
    earlier: dict[str, Any] | None = data.get("stash")
    superseded: list[dict[str, Any]] = list(data.get("supersededStashes") or [])
    if not os.path.isdir(record.path):
        # Removed already (a retry after the removal): what was kept stays reported.
        return {"stash": earlier, "supersededStashes": superseded, "branchTip": tip}
    snapshot = take_snapshot(git, record.path)
    if earlier is not None:
        if _trees(git, record, earlier["sha"]) == snapshot.trees:
            return {"stash": earlier, "supersededStashes": superseded, "branchTip": tip}
        superseded.append(earlier)  # the work changed since: keep both, report both
    if snapshot.clean:
        return {"stash": None, "supersededStashes": superseded, "branchTip": tip}
    nonce, message = data["nonce"], data["message"]
    pin = pin_ref(record, nonce, snapshot.key)
    sha = resolve_commit(git, record.common_dir, pin)
    if sha is None:
        sha = commit_snapshot(git, record.path, snapshot, message)
        # Create-only (expected old value ""): a retry can never repoint an existing pin.
        git.run(
            "update-ref", "-m", message, pin, sha, "",
            cwd=record.common_dir, git_dir=record.common_dir,
        )  # fmt: skip
    elif _trees(git, record, sha) != snapshot.trees:
        raise WorktreeError(f"{pin} already points at {sha}, which holds other work")
    stash = {"sha": sha, "pinRef": pin, "message": message, "nonce": nonce}
    return {"stash": stash, "supersededStashes": superseded, "branchTip": tip}


def verify_captured(git: Git, record: WorktreeRecord, journal: Journal) -> dict[str, Any]:
    """The ``verify_captured`` step: every changed path is in the stash, else refuse (the
    worktree is kept, untouched, and the stash made so far is reported)."""
    if not os.path.isdir(record.path):
        return {"clean": True}
    left = take_snapshot(git, record.path).uncaptured
    if left:
        stash = journal.data("capture").get("stash")
        raise Refused(
            "not_captured",
            f"{len(left)} changed path(s) in {record.path} cannot be stashed (e.g. the nested"
            f" repository or submodule at {left[0]}); move them out of the worktree or commit"
            " them, then retry; the worktree is kept as it is"
            + (
                f" and the stash {stash['sha']} ({stash['pinRef']}) holds the rest" if stash else ""
            ),
            leftPaths=list(left[:LIST_LIMIT]),
            stash=stash,
        )
    return {"clean": True}


def still_captured(git: Git, record: WorktreeRecord, journal: Journal) -> None:
    """Right before a forced removal: the worktree still holds exactly what was stashed.

    Raises
    ------
    Refused
        ``not_captured`` if anything changed since the ``capture`` step (nothing is removed; a
        retry captures again).
    """
    stash = journal.data("capture").get("stash")
    snapshot = take_snapshot(git, record.path)
    same = snapshot.clean if stash is None else _trees(git, record, stash["sha"]) == snapshot.trees
    if not same or snapshot.uncaptured:
        raise Refused(
            "not_captured",
            f"{record.path} changed after its work was stashed; nothing was removed: retry to"
            " stash it again",
            stash=stash,
        )


def _trees(git: Git, record: WorktreeRecord, sha: str) -> tuple[str, str, str | None]:
    return stash_trees(git, record.common_dir, sha)
