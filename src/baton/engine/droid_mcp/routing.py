"""Which backend serves a droid-mcp call for a session (``droid-mcp.md``, the routing table):

=====================  ====================================================================
target                 backend
=====================  ====================================================================
own session (open)     its worker: event log, pending prompts, turns
own session (closed)   its kept in-memory state for reads; for sends a local session (guarded
                       local resume, or REST with a key), or a lost one if its file is gone
local session          the transcript on disk; sends resume it locally (guarded) or use REST
not on this machine    the Factory REST API, only with ``FACTORY_API_KEY``
=====================  ====================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from baton.engine.droid_mcp.own import OwnSession
from baton.errors import BatonError
from baton.harnesses.droid_files import SessionRecord

#: A Droid session id as Droid mints them (a UUID); anything else is refused before any lookup.
SESSION_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,127}")


@dataclass(frozen=True)
class Target:
    """Where a session lives: ``own`` (with the own session, and for a closed one the record of
    its transcript when there still is one), ``local`` (with its record), or ``remote`` (no
    local file; REST only)."""

    kind: Literal["own", "local", "remote"]
    session_id: str
    own: OwnSession | None = None
    record: SessionRecord | None = None
    #: Baton's store knows the session (it ran here before a restart) though no file holds it.
    ran_here: bool = False


def check_session_id(session: object) -> str:
    """The session id, or ``invalid_argument``."""
    if not isinstance(session, str) or not SESSION_ID.fullmatch(session):
        raise BatonError("invalid_argument", "session must be a Droid session id (a UUID)")
    return session


def transcript_missing(session_id: str) -> BatonError:
    """The error for a session Baton ran here whose transcript is gone (no REST configured)."""
    return BatonError(
        "local_resume_refused",
        f"session {session_id!r} ran in Baton on this machine, but its transcript is no longer "
        "under ~/.factory/sessions, so it cannot be resumed here (and the Factory REST API, "
        "FACTORY_API_KEY, is not configured)",
        reasons=["transcript_missing"],
    )


def unknown_session(session_id: str, *, rest: bool) -> BatonError:
    """The error for a session that is neither own nor on this machine."""
    if rest:
        return BatonError("unknown_session", f"no session {session_id!r} here or on Factory")
    return BatonError(
        "rest_required",
        f"session {session_id!r} is not on this machine; reaching it needs the Factory REST API "
        "(FACTORY_API_KEY), which is not configured",
    )
