"""Timestamps and identifiers."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def utc_now() -> str:
    """UTC ISO 8601 with milliseconds and ``Z`` (``controller-tools.md``: UTC ISO strings)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id(prefix: str) -> str:
    """``<prefix>-<uuid4>``, e.g. ``run-6f1c...``."""
    return f"{prefix}-{uuid.uuid4()}"
