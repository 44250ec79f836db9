"""``droid_find``'s listing order and cursor: where each session goes, and the position after it.

Rules (``shared/spec/droid-mcp.md``, ``droid_find``; ``shared/design/WAVE2.md`` §7.1): newest
first by transcript mtime; a workstream (sessions sharing a missionId) is placed at its newest
member and kept together, the orchestrator first, then its agents newest first. The cursor is an
opaque base64 of ``{sortKey, id}`` of the last session returned; the next page starts at the
first sort key after it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence

from baton.errors import BatonError
from baton.harnesses.droid.local.index import SessionRecord

CURSOR_MAX_CHARS = 2048

SortKey = tuple[int, str, int, int, str]  # (-group mtime, group id, rank, -mtime, id)


def order_sessions(records: Sequence[SessionRecord]) -> list[tuple[SortKey, SessionRecord]]:
    """Sessions in listing order, with the sort key each cursor is made from.

    ``records`` come newest first (the index's order). A workstream takes the place of its
    newest member; inside it the orchestrator comes first, then the rest newest first.
    """
    members: dict[str, list[SessionRecord]] = {}
    for record in records:
        if record.mission_id is not None:
            members.setdefault(record.mission_id, []).append(record)
    out: list[tuple[SortKey, SessionRecord]] = []
    for record in records:
        mission = record.mission_id
        if mission is None:
            out.append(((-record.mtime_ns, record.id, 0, -record.mtime_ns, record.id), record))
            continue
        group = members.pop(mission, None)
        if group is None:
            continue  # already placed with its newest member
        head = group[0]
        for member in sorted(group, key=lambda m: (m.role != "orchestrator", -m.mtime_ns, m.id)):
            rank = 0 if member.role == "orchestrator" else 1
            key = (-head.mtime_ns, head.id, rank, -member.mtime_ns, member.id)
            out.append((key, member))
    return out


def encode_cursor(key: SortKey) -> str:
    """The opaque cursor for the position after the session with sort key ``key``."""
    body = {"sortKey": [key[0], key[1], key[2], key[3]], "id": key[4]}
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: object) -> SortKey:
    """Parse a cursor made by :func:`encode_cursor`.

    Raises
    ------
    BatonError
        ``invalid_argument`` if it is not one.
    """
    bad = BatonError(
        "invalid_argument", "cursor is not a droid_find cursor; pass nextCursor back unchanged"
    )
    if not isinstance(cursor, str) or len(cursor) > CURSOR_MAX_CHARS:
        raise bad
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        raise bad from None
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise bad
    key = value.get("sortKey")
    if not (isinstance(key, list) and len(key) == 4):
        raise bad
    group_mtime, group_id, rank, mtime = key
    if not (
        type(group_mtime) is int
        and isinstance(group_id, str)
        and type(rank) is int
        and type(mtime) is int
    ):
        raise bad
    return (group_mtime, group_id, rank, mtime, value["id"])
