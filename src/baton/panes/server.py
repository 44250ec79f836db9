"""A private tmux server and its panes, driven through ``libtmux`` and never on the event loop.

Every tmux call is a short-lived ``tmux`` client process (libtmux is synchronous); each one runs in
a worker thread (:func:`asyncio.to_thread`) so a slow tmux never stalls the loop that watches other
panes. The server is Baton's own: it listens on the socket path it was given (``-S``), never on the
user's default server, and is started with a config file Baton writes next to that socket.

Where libtmux's convenience methods do not fit, commands go through ``Server.cmd`` with explicit
arguments (measured on tmux 3.3a and libtmux 0.62, ``shared/reference/tmux-agents.md`` §6):

- ``Server.new_session`` joins the command into one shell string and passes ``-e`` variables in
  argv (secrets would show in ``ps``); we pass the program as argv after ``--`` so tmux executes it
  without a shell, and chain ``pipe-pane`` in the same call so the raw log misses no byte;
- ``Pane.send_keys`` puts no ``--`` before the keys (text starting with ``-`` is silently dropped)
  and sends Enter by default; we always send keys and text separately, after ``--``;
- ``set_buffer`` passes the text in argv (fails near 100 kB); prompts go through ``load_buffer``
  from a private temporary file, then ``paste-buffer -p -d`` (bracketed, buffer deleted);
- ``Pane.capture_pane`` returns stdout and drops stderr, so a vanished pane would read as an empty
  screen; we run ``capture-pane`` ourselves and raise when the pane is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import libtmux

#: The server's configuration (``-f``): applied once, when the server starts. A large history for
#: screen answers; focus events so Claude Code shows no "focus-events off" tip; no status line so
#: the pane is the whole window. (``shared/reference/tmux-agents.md`` §0.)
SERVER_CONFIG = """\
set -g history-limit 50000
set -g focus-events on
set -g default-terminal "tmux-256color"
set -g status off
set -g remain-on-exit off
"""

_GONE_MARKERS = (
    "can't find pane",
    "can't find session",
    "can't find window",
    "no server running",
    "error connecting to",
    "server exited",
)


class TmuxError(Exception):
    """A tmux command failed; ``gone`` when its target (pane, session, server) no longer exists."""

    def __init__(self, message: str, *, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone


@dataclass(frozen=True, slots=True)
class PaneInfo:
    """What tmux says about a pane: ids, the pid of its process, and its size (cells)."""

    session_name: str
    pane_id: str
    pane_pid: int
    width: int
    height: int
    dead: bool


_INFO_FORMAT = (
    "#{session_name}\t#{pane_id}\t#{pane_pid}\t#{pane_width}\t#{pane_height}\t#{pane_dead}"
)


@dataclass(frozen=True, slots=True)
class PanePosition:
    """A pane's cursor as a line of its whole text: ``history`` scrollback lines above the
    screen, the cursor on screen line ``cursor`` (0 at the top), so on line ``history +
    cursor`` counted from the oldest scrollback line. That count stays true while scrollback
    grows; once ``history`` reaches ``history_limit`` tmux drops the oldest lines and it no
    longer does. ``alternate``: a full-screen program's alternate screen is shown (it has no
    scrollback)."""

    history: int
    cursor: int
    history_limit: int
    alternate: bool

    @property
    def line(self) -> int:
        return self.history + self.cursor

    @property
    def counted(self) -> bool:
        """Line numbers from the oldest scrollback line still hold (nothing was dropped, and
        the normal screen is shown)."""
        return not self.alternate and self.history < self.history_limit


_POSITION = "#{history_size}\t#{cursor_y}\t#{history_limit}\t#{alternate_on}"


def _parse_info(line: str) -> PaneInfo | None:
    parts = line.split("\t")
    if len(parts) != 6 or not parts[2].isdigit():
        return None
    return PaneInfo(
        session_name=parts[0],
        pane_id=parts[1],
        pane_pid=int(parts[2]),
        width=int(parts[3] or 0),
        height=int(parts[4] or 0),
        dead=parts[5] == "1",
    )


class TmuxServer:
    """Baton's tmux server on ``socket_path`` (started on first use by ``new-session``).

    Parameters
    ----------
    socket_path
        Absolute path of the server's socket. Unix socket paths are limited to 107 bytes.
    """

    def __init__(self, socket_path: Path) -> None:
        if len(os.fsencode(socket_path)) > 100:
            raise ValueError(f"tmux socket path too long (max 100 bytes): {socket_path}")
        self.socket_path = socket_path
        self.config_path = socket_path.parent / f"{socket_path.name}.conf"
        self._server = libtmux.Server(
            socket_path=str(socket_path), config_file=str(self.config_path)
        )

    # -- commands -------------------------------------------------------------------------------

    def _run_sync(self, args: Sequence[str]) -> list[str]:
        proc = self._server.cmd(*args)
        if proc.returncode != 0 or proc.stderr:
            message = (
                " ".join(str(line) for line in proc.stderr) or f"exit status {proc.returncode}"
            )
            gone = any(marker in message for marker in _GONE_MARKERS)
            raise TmuxError(f"tmux {args[0]}: {message}", gone=gone)
        return [str(line) for line in proc.stdout]

    async def run(self, *args: str) -> list[str]:
        """Run one tmux command on this server in a worker thread; its stdout lines.

        Raises
        ------
        TmuxError
            On a non-zero exit status or any stderr output (``gone`` if the target is missing).
        """
        return await asyncio.to_thread(self._run_sync, list(args))

    # -- server ---------------------------------------------------------------------------------

    def write_config(self) -> None:
        """Write the server's config file (mode 0600) if it differs; the directory must exist."""
        if self.config_path.exists() and self.config_path.read_text() == SERVER_CONFIG:
            return
        fd, tmp = tempfile.mkstemp(dir=self.config_path.parent, prefix=".tmux-conf-")
        with os.fdopen(fd, "w") as handle:
            handle.write(SERVER_CONFIG)
        os.replace(tmp, self.config_path)

    async def server_pid(self) -> int | None:
        """The tmux server's pid, or None when no server listens on the socket."""
        try:
            lines = await self.run("display-message", "-p", "#{pid}")
        except TmuxError:
            return None
        return int(lines[0]) if lines and lines[0].isdigit() else None

    async def has_session(self, name: str) -> bool:
        """True if a session of exactly this name exists (False also when no server runs)."""
        try:
            await self.run("has-session", "-t", f"={name}")
        except TmuxError:
            return False
        return True

    async def new_session(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: str,
        width: int,
        height: int,
        pipe_command: str,
    ) -> PaneInfo:
        """Start ``argv`` (executed directly, no shell) as a detached session's only pane, and
        pipe the pane's output to ``pipe_command`` (a shell command) in the same tmux call.

        Raises
        ------
        TmuxError
            If tmux refuses (e.g. a session of that name exists) or prints no pane id.
        """
        lines = await self.run(
            "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), "-c", cwd,
            "-P", "-F", _INFO_FORMAT, "--", *argv,
            ";", "pipe-pane", "-o", "-t", f"={name}:", pipe_command,
        )  # fmt: skip
        info = _parse_info(lines[0]) if lines else None
        if info is None:
            raise TmuxError(f"tmux new-session printed no pane: {lines!r}")
        return info

    async def pane_info(self, pane_id: str) -> PaneInfo | None:
        """The pane's current facts, or None if the pane (or the server) is gone."""
        try:
            lines = await self.run("display-message", "-p", "-t", pane_id, _INFO_FORMAT)
        except TmuxError as exc:
            if exc.gone:
                return None
            raise
        info = _parse_info(lines[0]) if lines else None
        # display-message on a missing pane prints nothing and succeeds on tmux 3.3a (measured).
        return info if info is not None and info.pane_id == pane_id else None

    async def kill_session(self, name: str) -> None:
        """Kill the session if it exists (no error when it, or the server, is already gone)."""
        with contextlib.suppress(TmuxError):
            await self.run("kill-session", "-t", f"={name}")

    async def kill_server(self) -> None:
        """Kill this server and every pane in it (no error when none runs)."""
        with contextlib.suppress(TmuxError):
            await self.run("kill-server")

    def pane(self, pane_id: str) -> TmuxPane:
        """A handle on one pane of this server (no tmux call is made)."""
        return TmuxPane(self, pane_id)


class TmuxPane:
    """Operations on one pane, each a single tmux call in a worker thread."""

    def __init__(self, server: TmuxServer, pane_id: str) -> None:
        self.server = server
        self.pane_id = pane_id

    async def capture(self, history: int = 0) -> list[str]:
        """The pane's visible text (plus ``history`` lines of scrollback above it), one string
        per screen line with wrapped lines joined and trailing blanks removed.

        Raises
        ------
        TmuxError
            ``gone`` when the pane no longer exists.
        """

        return await self.capture_from(-history if history > 0 else None)

    async def capture_from(self, start: int | None) -> list[str]:
        """The pane's text from line ``start`` to the bottom of the screen (tmux's ``-S``:
        0 is the screen's top line, negative numbers are scrollback lines above it; None: the
        screen only), as :meth:`capture` gives it.

        Raises
        ------
        TmuxError
            ``gone`` when the pane no longer exists.
        """
        args = ["capture-pane", "-p", "-J", "-t", self.pane_id]
        if start is not None:
            args[1:1] = ["-S", str(start)]
        return [line.rstrip() for line in await self.server.run(*args)]

    async def position(self) -> PanePosition | None:
        """Where the pane's cursor is, in lines counted from the top of its scrollback (None
        when tmux's answer cannot be read).

        Raises
        ------
        TmuxError
            ``gone`` when the pane no longer exists.
        """
        lines = await self.server.run("display-message", "-p", "-t", self.pane_id, _POSITION)
        parts = lines[0].split("\t") if lines else []
        if len(parts) != 4 or not all(part.isdigit() for part in parts):
            return None
        history, cursor, limit, alternate = map(int, parts)
        return PanePosition(
            history=history, cursor=cursor, history_limit=limit, alternate=alternate == 1
        )

    async def keys(self, *names: str) -> None:
        """Send named keys (``Enter``, ``Escape``, ``C-c``, ``Down``...) in order, as keys."""
        await self.server.run("send-keys", "-t", self.pane_id, "--", *names)

    async def literal(self, text: str) -> None:
        """Type ``text`` literally (``send-keys -l``); no Enter."""
        await self.server.run("send-keys", "-t", self.pane_id, "-l", "--", text)

    async def paste(self, text: str, scratch: Path) -> None:
        """Paste ``text`` as one bracketed paste (``load-buffer`` from a 0600 file in ``scratch``,
        then ``paste-buffer -p -d``). tmux brackets it only if the program enabled bracketed
        paste mode (all three agent TUIs do); line feeds are sent as carriage returns otherwise.
        """
        name = f"baton-{uuid.uuid4().hex[:12]}"
        fd, path = tempfile.mkstemp(dir=scratch, prefix=".paste-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode("utf-8"))
            await self.server.run("load-buffer", "-b", name, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        try:
            await self.server.run("paste-buffer", "-p", "-d", "-b", name, "-t", self.pane_id)
        except TmuxError:
            with contextlib.suppress(TmuxError):
                await self.server.run("delete-buffer", "-b", name)
            raise
