#!/usr/bin/env python3
"""A tiny interactive terminal program for testing the tmux harness's ``generic`` adapter.

Stdlib only. It puts its terminal in raw mode, turns bracketed paste on (``ESC[?2004h``, as the
real agent TUIs do) and shows the prompt ``fake> ``. Input:

* a bracketed paste (``ESC[200~ ... ESC[201~``) or typed characters go into the input line;
* Enter submits the line (the first ``$FAKE_TUI_SWALLOW_ENTERS`` Enters are ignored, to force the
  harness's guarded retry); ``/quit`` exits;
* Escape or ``C-c`` interrupts a running answer.

A submitted line is answered by the ``FAKE-SCRIPT: {"steps": [...]}`` it contains
(:mod:`tests.fakes.model_server` syntax): a ``text`` step prints its text in ``chunks`` pieces
``delayMs`` apart, with a ``⠋ working (esc to interrupt)`` line meanwhile; an ``ask`` step prints
``<question> [y/n]`` and waits for ``y`` or ``n``; an ``exit`` step ends the program (its value
is the exit status) in the middle of the answer. ``$FAKE_TUI_READY_DELAY_MS`` delays the first
prompt (a slow start). Without a script the answer is
``ok: <n> chars``.

Every input event is appended to ``$FAKE_TUI_LOG`` (JSON lines with ``time.monotonic()`` in
``t``): ``paste`` (with the exact text), ``enter`` (``swallowed``), ``submit`` (the line),
``interrupt`` (with the ``key``: ``Escape`` or ``C-c``), ``answer``, ``exit``.
"""

from __future__ import annotations

import json
import os
import select
import sys
import termios
import time
import tty
from typing import Any

PROMPT = "fake> "
MARKER = "FAKE-SCRIPT:"
PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"


class Terminal:
    def __init__(self) -> None:
        self.pending = b""
        self.swallow = int(os.environ.get("FAKE_TUI_SWALLOW_ENTERS", "0"))
        self.log_path = os.environ.get("FAKE_TUI_LOG")

    def log(self, event: str, **fields: Any) -> None:
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"t": time.monotonic(), "event": event, **fields}) + "\n")

    def out(self, text: str) -> None:
        os.write(1, text.replace("\n", "\r\n").encode())

    def events(self, timeout: float | None) -> list[tuple[str, str]]:
        """Input events available within ``timeout`` s (None: wait for at least one)."""
        ready, _, _ = select.select([0], [], [], timeout)
        if ready:
            data = os.read(0, 65536)
            if not data:
                raise SystemExit(0)
            self.pending += data
        found: list[tuple[str, str]] = []
        while self.pending:
            if self.pending.startswith(PASTE_START):
                end = self.pending.find(PASTE_END)
                if end < 0:
                    more, _, _ = select.select([0], [], [], 1.0)
                    if not more:
                        break
                    self.pending += os.read(0, 65536)
                    continue
                text = self.pending[len(PASTE_START) : end].decode("utf-8", errors="replace")
                self.pending = self.pending[end + len(PASTE_END) :]
                found.append(("paste", text.replace("\r", "\n")))
            elif self.pending[:1] in (b"\r", b"\n"):
                self.pending = self.pending[1:]
                found.append(("enter", ""))
            elif self.pending[:1] == b"\x03":
                self.pending = self.pending[1:]
                found.append(("interrupt", "C-c"))
            elif self.pending[:1] == b"\x1b":
                self.pending = self.pending[1:]
                found.append(("interrupt", "Escape"))
            elif self.pending[:1] == b"\x7f":
                self.pending = self.pending[1:]
                found.append(("backspace", ""))
            else:
                cut = 1
                while cut < len(self.pending) and self.pending[cut] & 0xC0 == 0x80:
                    cut += 1
                found.append(("char", self.pending[:cut].decode("utf-8", errors="replace")))
                self.pending = self.pending[cut:]
        return found


def parse_script(text: str) -> list[dict[str, Any]] | None:
    at = text.rfind(MARKER)
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[at + len(MARKER) :].lstrip())
    except ValueError:
        return None
    steps = value.get("steps") if isinstance(value, dict) else None
    return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else None


def answer(term: Terminal, line: str) -> None:
    steps = parse_script(line)
    if steps is None:
        term.out(f"ok: {len(line)} chars\n")
        term.log("answer", text=f"ok: {len(line)} chars")
        return
    for step in steps:
        if "exit" in step:  # the program dies in the middle of its answer
            term.log("exit")
            raise SystemExit(int(step["exit"]))
        if "ask" in step:
            term.out(f"{step['ask']} [y/n] ")
            choice = ""
            while not choice:
                for kind, value in term.events(None):
                    if kind == "interrupt":
                        term.out("\ninterrupted\n")
                        term.log("interrupt", key=value)
                        return
                    if kind == "char" and value in "yn":
                        choice = value
                        break
            term.out(f"{choice}\n")
            term.log("answer", choice=choice)
            continue
        text = str(step.get("text", ""))
        chunks = max(1, min(int(step.get("chunks", 1)), max(1, len(text))))
        delay = int(step.get("delayMs", 0)) / 1000
        size = -(-len(text) // chunks) if text else 1
        term.out("⠋ working (esc to interrupt)\n")
        for index in range(0, max(len(text), 1), size):
            if index and delay:
                deadline = time.monotonic() + delay
                while (left := deadline - time.monotonic()) > 0:
                    keys = [value for kind, value in term.events(left) if kind == "interrupt"]
                    if keys:
                        term.out("\ninterrupted\n")
                        term.log("interrupt", key=keys[0])
                        return
            term.out(text[index : index + size])
        term.out("\n")
        term.log("answer", text=text)


def main() -> int:
    term = Terminal()
    # A slow start (``$FAKE_TUI_READY_DELAY_MS``): the prompt appears only after it.
    time.sleep(int(os.environ.get("FAKE_TUI_READY_DELAY_MS", "0")) / 1000)
    saved = termios.tcgetattr(0)
    tty.setraw(0)
    try:
        term.out("\x1b[?2004h")
        term.out("fake tui ready\n" + PROMPT)
        line = ""
        while True:
            for kind, value in term.events(None):
                if kind == "paste":
                    term.log("paste", text=value)
                    line += value
                    term.out(value.replace("\n", " "))
                elif kind == "char":
                    line += value
                    term.out(value)
                elif kind == "backspace" and line:
                    line = line[:-1]
                    term.out("\b \b")
                elif kind == "enter":
                    if term.swallow > 0:
                        term.swallow -= 1
                        term.log("enter", swallowed=True)
                        continue
                    term.log("enter", swallowed=False)
                    term.log("submit", text=line)
                    term.out("\n")
                    if line.strip() == "/quit":
                        term.log("exit")
                        return 0
                    answer(term, line)
                    line = ""
                    term.out(PROMPT)
    finally:
        termios.tcsetattr(0, termios.TCSADRAIN, saved)


if __name__ == "__main__":
    sys.exit(main())
