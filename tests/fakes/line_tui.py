#!/usr/bin/env python3
"""A line-reading terminal program for testing the tmux harness's ``generic`` adapter: the
common shape of a shell script or a REPL, as opposed to :mod:`tests.fakes.fake_tui`'s raw-mode
program that takes single keys.

Stdlib only. The terminal stays in canonical ("cooked") mode, so the tty driver echoes what is
typed and hands the program a line only when Enter is pressed; bracketed paste is never turned
on. It prints a banner, then reads lines at the prompt ``line> `` (``input()``). A line is
answered by the ``FAKE-SCRIPT: {"steps": [...]}`` it contains (the syntax of
:mod:`tests.fakes.model_server`):

* ``{"text": "..."}`` prints the text;
* ``{"quote": true}`` prints ``you asked: <the line as read>``;
* ``{"ask": "Proceed?"}`` prints ``Proceed? [y/n] `` and reads one *line* for the answer (typed
  ``y`` alone reaches it only with its Enter), then prints ``proceeding with <answer>``;
* ``{"ignore": "Proceed?"}`` prints ``Proceed? [y/n] `` and never reads again (the tty still
  echoes what is typed; the program ignores it) until it is killed.

Without a script the answer is ``ok: <n> chars``. ``$FAKE_LINE_MASK=1`` reads the prompt line
with the tty's echo off and shows ``*`` for each character instead, as a password prompt does
(a program whose screen never shows the text typed). Every event is appended to ``$FAKE_TUI_LOG`` as
a JSON line (``submit`` with the line, ``answer`` with the answer line).
"""

from __future__ import annotations

import json
import os
import sys
import termios
import time
import tty
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# The path above makes the repository's own fakes importable when run as a script.
from tests.fakes.fake_tui import parse_script

PROMPT = "line> "


def log(event: str, **fields: Any) -> None:
    path = os.environ.get("FAKE_TUI_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"t": time.monotonic(), "event": event, **fields}) + "\n")


def ask(question: str) -> str:
    sys.stdout.write(f"{question} [y/n] ")
    sys.stdout.flush()
    return sys.stdin.readline().rstrip("\n")


def respond(line: str) -> None:
    steps = parse_script(line)
    if steps is None:
        print(f"ok: {len(line)} chars")
        return
    for step in steps:
        if "ignore" in step:
            ask_only = f"{step['ignore']} [y/n] "
            sys.stdout.write(ask_only)
            sys.stdout.flush()
            log("ignoring")
            while True:  # never reads: what is typed stays in the tty's line buffer
                time.sleep(3600)
        if "ask" in step:
            answer = ask(str(step["ask"]))
            log("answer", choice=answer)
            print(f"proceeding with {answer}")
        elif step.get("quote"):
            print(f"you asked: {line}")
        elif "text" in step:
            print(str(step["text"]))


def masked(prompt: str) -> str:
    """A line read with the tty's echo off, ``*`` shown per character (Enter ends it)."""
    sys.stdout.write(prompt)
    sys.stdout.flush()
    saved = termios.tcgetattr(0)
    tty.setcbreak(0)
    line = ""
    try:
        while True:
            char = os.read(0, 1)
            if not char:
                raise EOFError
            if char in (b"\n", b"\r"):
                break
            line += char.decode("utf-8", errors="replace")
            os.write(1, b"*")
    finally:
        termios.tcsetattr(0, termios.TCSADRAIN, saved)
    sys.stdout.write("\n")
    return line


def main() -> int:
    mask = os.environ.get("FAKE_LINE_MASK") == "1"
    print("line tui 1.0 (a banner line that is no turn's answer)")
    while True:
        try:
            line = masked(PROMPT) if mask else input(PROMPT)
        except EOFError:
            return 0
        log("submit", text=line)
        if line.strip() == "/quit":
            return 0
        respond(line)


if __name__ == "__main__":
    sys.exit(main())
