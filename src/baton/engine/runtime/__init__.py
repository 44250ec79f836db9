"""The one live-session runtime (``docs/architecture.md`` §2): a :class:`~.live.LiveSession` per
agent conversation, whatever hosts the agent, with one state machine (:mod:`.state`), one event log,
one pending-prompt registry (:mod:`.prompts`) and its turns (:mod:`.turns`); the live table of
an engine is :class:`~.table.LiveSessions`.

Layers inside (each imports only the ones before it): ``state`` → ``turns``, ``prompts`` →
``core`` (state, log, shared steps) → ``dispatch`` (events) → ``supervise`` (host, agent,
re-adoption) → ``live`` (commands) → ``table``.
"""
