"""The names of the tmux sessions Baton starts (``WAVE2.md`` §9.1): predictable, so a person can
find and attach to one, and never reused, so a stale name cannot reach a new agent."""

from __future__ import annotations

import secrets

from baton.text import slugify


def session_name(slug: str, short_id: str | None = None) -> str:
    """The predictable tmux session name ``baton-<slug>-<short id>`` (WAVE2 §9.1).

    ``slug`` is slugified; ``short_id`` defaults to 8 random hex digits.
    """
    return f"baton-{slugify(slug)}-{short_id or secrets.token_hex(4)}"
