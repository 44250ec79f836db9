"""Where Droid can run: the workspace rule of its session directory.

Droid stores a session under ``~/.factory/sessions/<name>/``, where ``<name>`` is the working
directory's path with every ``/`` replaced by ``-`` (so ``/home/me/app`` becomes
``-home-me-app``): one file name, and Linux file names hold at most 255 bytes (``NAME_MAX``).
Measured with the real Droid CLI 0.225.2 against the scripted model
(``tests/e2e/test_droid_workspace_limit.py``): a real path of 255 bytes runs; 256 bytes, ASCII or
not, fails every turn with ``ENAMETOOLONG: name too long, mkdir '~/.factory/sessions/-...'``.
Only ``/`` is mapped, so the name is exactly as long as the path's UTF-8 encoding.

The Droid services pass :data:`WORKSPACE_LIMITS` to ``approve_workspace`` (a workspace refused
here is refused before anything touches it, instead of every turn failing inside Droid).
"""

from __future__ import annotations

import os

from baton.errors import BatonError
from baton.text import shown

SESSION_DIR_MAX_BYTES = 255
"""Longest workspace real path Droid can run in, in UTF-8 bytes (module docstring)."""


def check_session_dir(workspace: str, real: str) -> None:
    """Refuse a workspace whose real path ``real`` (of the spelling ``workspace``) is longer
    than :data:`SESSION_DIR_MAX_BYTES` in UTF-8.

    Raises
    ------
    BatonError
        ``invalid_argument``, naming the resolved size and the limit.
    """
    size = len(os.fsencode(real))
    if size > SESSION_DIR_MAX_BYTES:
        raise BatonError(
            "invalid_argument",
            f"workspace {shown(workspace)!r} resolves to a path of {size} bytes; Droid names its "
            f"session directory after the path, and a file name holds at most "
            f"{SESSION_DIR_MAX_BYTES} bytes, so use a workspace whose real path is at most "
            f"{SESSION_DIR_MAX_BYTES} bytes (UTF-8)",
            workspace=shown(real),
        )


#: The workspace rules of a Droid session, for ``approve_workspace(..., limits=)``.
WORKSPACE_LIMITS = (check_session_dir,)
