"""Checks of the arguments ``droid_start`` and ``droid_send`` share (``droid-mcp.md``, tool
reference and "Idempotency keys"); each raises ``invalid_argument`` and changes nothing."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from baton.engine.droid_mcp.own import repo_of
from baton.engine.validation import PROMPT_MAX_BYTES
from baton.errors import BatonError
from baton.text import has_lone_surrogate


def check_in_repository(workspace: str) -> None:
    """``worktree`` needs a git repository (else Droid exits: "Not inside a git repository")."""
    if not os.path.exists(os.path.join(repo_of(workspace), ".git")):
        raise BatonError(
            "invalid_argument",
            f"worktree needs a cwd inside a git repository; {workspace} is in none",
        )


def request_key(args: Mapping[str, Any]) -> str:
    key = args.get("idempotencyKey")
    if not isinstance(key, str) or not 1 <= len(key) <= 200:
        raise BatonError("invalid_argument", "idempotencyKey is required: 1-200 characters")
    if "\x00" in key or has_lone_surrogate(key):
        raise BatonError("invalid_argument", "idempotencyKey contains a NUL or a lone surrogate")
    return key


def prompt_text(args: Mapping[str, Any]) -> str:
    prompt = args.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise BatonError("invalid_argument", "prompt must not be empty")
    if "\x00" in prompt or has_lone_surrogate(prompt):
        raise BatonError("invalid_argument", "prompt contains a NUL or a lone surrogate")
    if len(prompt.encode("utf-8")) > PROMPT_MAX_BYTES:
        raise BatonError("invalid_argument", f"prompt is larger than {PROMPT_MAX_BYTES} bytes")
    return prompt
