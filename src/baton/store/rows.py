"""Row helpers shared by the store's query modules."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

#: One row as a dict of column name to value.
Row = dict[str, Any]


def one(cursor: sqlite3.Cursor) -> Row | None:
    """The first row of ``cursor`` as a dict, or None."""
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cursor.description], row, strict=True))


def all_rows(cursor: sqlite3.Cursor) -> list[Row]:
    """Every row of ``cursor`` as dicts."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def dumps(value: Any) -> str | None:
    """JSON text for a ``*_json`` column (None stays NULL)."""
    return None if value is None else json.dumps(value, ensure_ascii=False)
