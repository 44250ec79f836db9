"""``spawnea_get_turn``: a turn's output after a cursor, as a versioned long-poll
(``spawnea-control-api.md``, ``spawnea_get_turn``; what a page holds is
:mod:`~baton.engine.spawnea.output`'s).

The caller names a turn, not a session: the turn's owner is resolved and the scope enforced
before anything is read. A connection with the root's injected identity reads its children's
turns only. Turns and cursors are volatile: they live as long as the daemon (its epoch).
"""

from __future__ import annotations

from baton.engine.spawnea.output import extracted, turn_output
from baton.engine.spawnea.records import TurnOutput
from baton.engine.spawnea.requests import GetTurn
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.scopes import Scopes
from baton.engine.spawnea.state import SpawneaState
from baton.engine.spawnea.turns import Cursor
from baton.errors import BatonError


class TurnReads:
    """Reads of tracked turns (see the module docstring)."""

    def __init__(self, state: SpawneaState, scopes: Scopes) -> None:
        self.state = state
        self.scopes = scopes

    async def get_turn(self, scope: Scope, request: GetTurn) -> TurnOutput:
        """Output after ``request.cursor``, waiting up to ``wait_ms`` for a version newer than
        ``after_version`` (or for the turn to need input or end).

        Raises
        ------
        BatonError
            ``not_found`` (an unknown turn, or one outside the scope), ``forbidden`` (an injected
            identity reading its own root's turn).
        """
        turns = self.state.turns
        turn = turns.by_id.get(request.turn_id)
        if turn is None:
            raise BatonError("not_found", "unknown turn (turns do not survive a daemon restart)")
        session = self.scopes.turn_owner(scope, turn.session_key)
        if session == scope.root and not scope.may_prompt_root():
            raise BatonError("forbidden", "this connection reads the turns of its children only")
        if request.wait_ms and turn.version <= request.after_version:
            await turn.wait_newer(request.after_version, request.wait_ms / 1000)
        offset, place, expired = turn.raw_start, None, False
        if request.cursor:
            cursor = Cursor.decode(request.cursor)
            if cursor is None or cursor.epoch != turns.epoch or cursor.turn_id != turn.turn_id:
                expired = True
            else:
                offset, place = cursor.raw_offset, cursor.compact
        hosted = self.state.hosted.get(turn.session_key)
        mode = request.output_mode
        compact = await extracted(hosted, turn) if mode == "compact" else None
        page = turn_output(hosted, turn, mode, offset, request.max_bytes, expired, compact, place)
        cursor = Cursor(turns.epoch, turn.turn_id, page.next_offset, page.compact)
        return page.output(cursor.encode())
