"""Readers of what an agent TUI reports about itself, each turning one report into a neutral
:class:`~baton.harnesses.tmux.reports.event.AgentReport`.

Measured on the pinned versions (``docs/tmux-harness.md``, "What each agent reports"): Claude
Code 2.1.332 and Droid 0.225.2 run hook programs on events (JSON on stdin); Codex 0.171.0 runs
hooks too (after they are trusted), a ``notify`` program (JSON in argv) and writes OSC 7501
state and OSC 9 notifications into its terminal. These modules only parse; wiring them to panes
is the harness's job.
"""
