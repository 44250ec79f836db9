"""The first program in every pane Baton starts: loads the agent's environment and execs it.

Run by tmux as ``python -I -S launch.py SPEC_FILE`` (stdlib only, no site packages, so it starts
fast and runs whatever Baton's own install looks like later). ``SPEC_FILE`` is a 0600 JSON file
``{"argv": [...], "env": {...}}`` written by the harness in a private directory; this program
reads it, deletes it, and replaces itself with ``argv`` (``execvpe``): the pane's process becomes
the agent, with the same pid and start time.

Why not ``tmux new-session -e VAR=value``: the values would be in the tmux client's argv, which
any local user can read in ``ps``; the agent's environment carries API keys (``CONVENTIONS.md``:
secrets travel in a child's environment, never in argv). The environment is taken whole from the
file (the Baton process's environment plus the session's), except the variables tmux itself sets
for the pane (``TERM``, ``TMUX``, ``TMUX_PANE``), so a tmux server started by an older Baton does
not leak its stale environment into new panes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

#: Variables that describe the pane's terminal: tmux's values win over the file's.
PANE_VARIABLES = ("TERM", "TMUX", "TMUX_PANE", "COLORTERM")


def main(argv: list[str]) -> int:
    """Exec the agent described by the spec file ``argv[1]``; returns only on failure."""
    if len(argv) != 2:
        print("usage: launch.py SPEC_FILE", file=sys.stderr)
        return 2
    path = argv[1]
    try:
        with open(path, encoding="utf-8") as handle:
            spec = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"baton launch: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    command = spec.get("argv")
    env = spec.get("env")
    if not isinstance(command, list) or not command or not isinstance(env, dict):
        print("baton launch: malformed spec file", file=sys.stderr)
        return 2
    environment = {str(k): str(v) for k, v in env.items() if k not in PANE_VARIABLES}
    for name in PANE_VARIABLES:
        if name in os.environ:
            environment[name] = os.environ[name]
    try:
        os.execvpe(str(command[0]), [str(a) for a in command], environment)
    except OSError as exc:
        print(f"baton launch: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
