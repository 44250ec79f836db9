"""The bearer token of the HTTP transport: one private file, read once at startup.

Source: ``shared/spec/controller-tools.md`` (``tokenFile``: "≥32 URL-safe characters", mode 0600)
and ``shared/spec/controller.md`` ("No unauthenticated HTTP option exists").
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from baton.config import check_private_file
from baton.errors import ConfigError

MIN_TOKEN_CHARS: Final = 32
"""Minimum bearer token length (``controller-tools.md``: "≥32 URL-safe characters")."""
MAX_TOKEN_FILE_BYTES: Final = 4096
"""A token file larger than this is refused rather than read (not a token file)."""

_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9_-]+")


def load_token(path: str | os.PathLike[str]) -> str:
    """Read and validate the bearer token file.

    The file holds one token: at least 32 URL-safe characters ``[A-Za-z0-9_-]`` (surrounding
    whitespace, such as the trailing newline ``baton token new`` writes, is ignored). It must be a
    regular file with no group/other permission bits (mode 0600).

    Returns
    -------
    str
        The token, without surrounding whitespace.

    Raises
    ------
    ConfigError
        If the file is missing, not a regular file, readable by group/other (the message names
        ``chmod 600``), larger than 4096 bytes, not ASCII, or the token is shorter than 32
        characters or contains characters outside ``[A-Za-z0-9_-]``. The message never contains
        the file's content.
    """
    file = Path(path)
    check_private_file(file, what="tokenFile")
    hint = f"make a new one with: baton token new {file}"
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"tokenFile {file}: {exc.strerror}") from exc
    if len(raw) > MAX_TOKEN_FILE_BYTES:
        raise ConfigError(f"tokenFile {file} is larger than {MAX_TOKEN_FILE_BYTES} bytes; {hint}")
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ConfigError(
            f"tokenFile {file} must hold URL-safe characters only (A-Z a-z 0-9 _ -); {hint}"
        ) from None
    if not _TOKEN_RE.fullmatch(token):
        raise ConfigError(
            f"tokenFile {file} must hold one token of URL-safe characters only "
            f"(A-Z a-z 0-9 _ -); {hint}"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"tokenFile {file} holds {len(token)} characters; the bearer token needs at least "
            f"{MIN_TOKEN_CHARS}; {hint}"
        )
    return token
