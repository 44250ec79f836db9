"""Records every service shares.

Each service returns records (frozen values, snake_case fields) that its surface renders in its
contract's words (``docs/architecture.md`` §3.2); a service's own records live in its package
(``baton.engine.controller.records``).
"""

from __future__ import annotations

#: States after which a run never changes (``controller.md``, "States").
TERMINAL_STATES = frozenset(
    {"succeeded", "failed", "cancelled", "interrupted", "timed_out", "unknown"}
)
