"""Intent fingerprints for idempotent start/continue (``controller.md``, request keys).

An intent is what a caller asked for under a ``requestKey``. Its fingerprint is a SHA-256 over a
canonical JSON of the operation, its target, the prompt and the *effective* settings. On a retry,
omitted autonomy, reasoning and routing take the originally accepted values, so an exact retry
matches and an explicitly different value conflicts. The prompt participates only through the
hash; it is never stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Intent:
    """The effective request behind a start (``target`` = workspace) or continue (= runId)."""

    operation: str
    target: str
    prompt: str
    model: str | None
    autonomy: str
    reasoning_effort: str | None
    reply_recipient: str | None

    def fingerprint(self) -> str:
        """Hex SHA-256 of the canonical JSON of every field."""
        canonical = json.dumps(
            {
                "v": 1,
                "operation": self.operation,
                "target": self.target,
                "prompt": self.prompt,
                "model": self.model,
                "autonomy": self.autonomy,
                "reasoningEffort": self.reasoning_effort,
                # Fingerprint v1 keeps the contract's name of the recipient: renaming the
                # key would make every permanent key written before the reply-channel rename
                # (store V7) conflict with its own exact retry.
                "puckConversationId": self.reply_recipient,
            },
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def fingerprint(payload: Mapping[str, Any]) -> str:
    """Hex SHA-256 of the canonical JSON of an intent ``payload`` (droid-mcp and Spawnea: the
    operation, its target, the prompt and the effective settings; the prompt is never stored)."""
    canonical = json.dumps(
        {"v": 1, **payload}, sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
