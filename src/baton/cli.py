"""Command line: ``baton serve``, ``baton daemon``, ``baton bridge``, ``baton approvals``,
``baton dashboard-url`` and ``baton token new``.

Startup refusals (bad config, unsafe or owned state directory, corrupt database) print one line
on stderr and exit non-zero, having changed nothing. A database whose damage only the whole-file
check finds (it runs in the background once serving starts, and every write waits for it:
``baton.store.integrity``) is refused the same way, with the same exit status, when it fails.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
from pydantic import ValidationError

from baton import config_env
from baton.config import Config, config_problems, load_config
from baton.engine.engine import Engine
from baton.errors import ConfigError, StateError, errors_within
from baton.runtime import runtime_dir
from baton.store import DatabaseError, OwnerLock, Store
from baton.store.statedir import prepare_state_directory, write_private_file

log = logging.getLogger("baton")

#: The surfaces ``baton serve`` serves (``baton.surfaces.SURFACES``, imported only to serve one:
#: every other command, ``baton bridge`` above all, starts without the surfaces' modules).
SURFACE_NAMES = ("controller", "droid-mcp")

EXIT_CONFIG = 2
EXIT_STATE = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="baton", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve one surface over MCP (stdio or HTTP)")
    serve.add_argument("--config", help="absolute path of the JSON config (default: embedded)")
    serve.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP instead of stdio")
    serve.add_argument(
        "--surface",
        default="controller",
        choices=sorted(SURFACE_NAMES),
        help="the tool set to serve (default: controller)",
    )
    _add_daemon_commands(sub)
    token = sub.add_parser("token", help="bearer tokens for HTTP mode")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    new = token_sub.add_parser("new", help="write a fresh private token file (mode 0600)")
    new.add_argument("file", help="where to write the token")
    return parser


def _add_daemon_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``baton daemon``, ``baton bridge``, ``baton approvals`` and ``baton dashboard-url``
    (``docs/daemon.md``, ``docs/dashboard.md``)."""
    config_help = "absolute path of the JSON config (default: embedded)"
    daemon = sub.add_parser("daemon", help="the long-lived host of every surface (foreground)")
    daemon.add_argument("--config", help=config_help)
    bridge = sub.add_parser("bridge", help="stdio MCP relayed to the daemon's gateway")
    bridge.add_argument("surface", choices=["controller", "droid-mcp", "spawnea"])
    bridge.add_argument("--config", help="the daemon's config (a running daemon must serve it)")
    bridge.add_argument(
        "--no-start", action="store_true", help="fail instead of starting a daemon when none runs"
    )
    approvals = sub.add_parser("approvals", help="approve or reject finalization requests")
    approvals.add_argument("--config", help=config_help)
    actions = approvals.add_subparsers(dest="approvals_command", required=True)
    listing = actions.add_parser("list", help="requests waiting for the operator")
    listing.add_argument("--all", action="store_true", help="every request, whatever its status")
    listing.add_argument("--json", action="store_true", help="print JSON")
    approve = actions.add_parser("approve", help="approve a request and run it now")
    approve.add_argument("id")
    approve.add_argument("--json", action="store_true", help="print JSON")
    reject = actions.add_parser("reject", help="reject a request; nothing changes in git")
    reject.add_argument("id")
    reject.add_argument("reason", nargs="?")
    reject.add_argument("--json", action="store_true", help="print JSON")
    finalize = actions.add_parser(
        "finalize", help="finalize a Spawnea root's worktree now (removes the root)"
    )
    finalize.add_argument("id", help="the root's session id")
    finalize.add_argument("how", choices=["integrate", "stash", "discard"])
    finalize.add_argument("--json", action="store_true", help="print JSON")
    for action in (listing, approve, reject, finalize):  # --config before or after the action
        action.add_argument("--config", default=argparse.SUPPRESS, help=config_help)
    dashboard_url = sub.add_parser(
        "dashboard-url", help="print a fresh one-time login URL of the daemon's web dashboard"
    )
    dashboard_url.add_argument("--config", help=config_help)
    for command in (daemon, bridge, approvals, dashboard_url):
        command.set_defaults(daemon_command=True)


def _daemon_command(args: argparse.Namespace) -> int:
    """Run ``baton daemon``, ``baton bridge``, ``baton approvals`` or ``baton dashboard-url``;
    the exit status."""
    if args.command == "bridge":
        from baton.daemon.bridge import bridge_main

        return bridge_main(args.surface, args.config, start=not args.no_start)
    os.environ.pop("DROID_MCP_TOKEN", None)  # no agent may inherit it
    try:
        # approvals and dashboard-url talk to a running daemon: they start no agent. The
        # daemon serves droid-mcp too, so the contract's variables are its fallbacks as well.
        daemon = args.command == "daemon"
        fallbacks = config_env.droid_mcp_fallbacks(os.environ) if daemon else {}
        config = load_config(args.config, fallbacks, need_droid=daemon)
    except ConfigError as exc:
        print(f"baton: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.command == "approvals":
        from baton.daemon.admin_client import approvals_main

        return approvals_main(
            Path(config.stateDirectory),
            args.approvals_command,
            getattr(args, "id", None),
            getattr(args, "reason", None),
            how=getattr(args, "how", None),
            show_all=getattr(args, "all", False),
            as_json=args.json,
        )
    if args.command == "dashboard-url":
        return _dashboard_url(Path(config.stateDirectory))
    from baton.daemon.host import run_daemon

    if config.transport == "http":
        from baton.transports.http import load_token

        assert config.tokenFile is not None  # Config requires it for http
        try:
            load_token(config.tokenFile)  # refuse a short or public token before owning state
        except ConfigError as exc:
            print(f"baton: {exc}", file=sys.stderr)
            return EXIT_CONFIG
    if (warning := config.exposure_warning()) is not None:
        print(f"baton: warning: {warning}", file=sys.stderr)
    for line in config_env.ignored(config, os.environ).values():
        print(f"baton: warning: {line}", file=sys.stderr)
    return run_daemon(config, exit_state=EXIT_STATE, exit_config=EXIT_CONFIG)


def _dashboard_url(state_directory: Path) -> int:
    """``baton dashboard-url``: a fresh one-time login URL on stdout (0), or one line on stderr
    when no daemon serves a dashboard for ``state_directory`` (1)."""
    from baton.dashboard import dashboard_login_url

    try:
        url = dashboard_login_url(state_directory)
    except StateError as exc:
        print(f"baton: {exc}", file=sys.stderr)
        return 1
    print(url)
    return 0


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``baton`` console script."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("BATON_LOG_LEVEL", "INFO"),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "token":
        sys.exit(_token_new(Path(args.file)))
    if getattr(args, "daemon_command", False):
        sys.exit(_daemon_command(args))
    env_token = os.environ.pop("DROID_MCP_TOKEN", None)  # no agent may inherit it
    try:
        droid_mcp = args.surface == "droid-mcp"
        fallbacks = config_env.droid_mcp_fallbacks(os.environ) if droid_mcp else {}
        if env_token and droid_mcp:
            fallbacks["tokenFile"] = _env_token_file(env_token)
        config = load_config(args.config, fallbacks)
        if args.http:
            config = _with_http(config, args.http)
        if config.transport == "http":
            from baton.transports.http import load_token

            assert config.tokenFile is not None  # Config requires it for http
            load_token(config.tokenFile)  # refuse a short or public token before owning state
    except ConfigError as exc:
        print(f"baton: {exc}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    if (warning := config.exposure_warning()) is not None:
        print(f"baton: warning: {warning}", file=sys.stderr)
    for line in config_env.ignored(config, os.environ).values() if droid_mcp else ():
        print(f"baton: warning: {line}", file=sys.stderr)
    sys.exit(serve(config, surface=args.surface))


def _env_token_file(token: str) -> str:
    """droid-mcp's ``DROID_MCP_TOKEN`` as a private token file in the runtime directory (0600,
    tmpfs where the system has one), so the HTTP listener reads it like any ``tokenFile``; the
    variable itself is already gone from the environment."""
    path = runtime_dir("tokens") / f"droid-mcp-{os.getpid()}.token"
    write_private_file(path, (token.strip() + "\n").encode())
    atexit.register(path.unlink, missing_ok=True)
    return str(path)


def _with_http(config: Config, spec: str) -> Config:
    host, sep, port = spec.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--http wants HOST:PORT, got {spec!r}")
    if config.tokenFile is None:
        raise ConfigError("HTTP mode requires tokenFile in the config (see: baton token new)")
    host = host.removeprefix("[").removesuffix("]")  # --http [::1]:8787
    updated = {**config.model_dump(), "transport": "http", "host": host, "port": int(port)}
    try:
        # Validated again, so the listener rules (loopback unless opted in) hold for --http too.
        return Config.model_validate(updated)
    except ValidationError as exc:
        raise ConfigError(f"--http {spec}: {config_problems(exc)}") from None


def _token_new(path: Path) -> int:
    if not path.is_absolute():
        print("baton: token file path must be absolute", file=sys.stderr)
        return EXIT_CONFIG
    try:
        _make_private_parents(path.parent)
    except OSError as exc:
        print(f"baton: cannot create directory {path.parent}: {exc.strerror}", file=sys.stderr)
        return EXIT_CONFIG
    if not path.parent.is_dir():
        print(f"baton: {path.parent} is not a directory", file=sys.stderr)
        return EXIT_CONFIG
    write_private_file(path, (secrets.token_urlsafe(32) + "\n").encode())
    print(f"wrote a new token to {path} (mode 0600); restart the server to use it", file=sys.stderr)
    return 0


def _make_private_parents(directory: Path) -> None:
    """Create the missing directories of ``directory``, each with mode 0700 (a secret's home).

    Existing directories are left as they are. ``Path.mkdir(parents=True)`` would create the
    intermediate ones with the umask's default mode instead.
    """
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for created in reversed(missing):
        created.mkdir(mode=0o700)
        created.chmod(0o700)  # mkdir's mode is filtered by the umask


def serve(config: Config, *, surface: str = "controller") -> int:
    """Own the state directory, settle what a previous owner left, and serve until EOF/signal.

    The process umask is left as the operator set it: workers, agents and every command an agent
    runs inherit it, so what they create in the user's repository gets the user's usual modes.
    Baton's own state stays private without it: every state file is created with an explicit
    0600 mode and directories with 0700 (SQLite gives its WAL and shared-memory files the
    database file's mode).
    """
    state_dir = Path(config.stateDirectory)
    owner = OwnerLock(state_dir, "serve")
    store = Store(state_dir)
    try:
        prepare_state_directory(state_dir)
        owner.acquire()
        store.open()
    except StateError as exc:
        print(f"baton: {exc}", file=sys.stderr)
        owner.release()
        return EXIT_STATE

    def release() -> None:
        store.close()
        owner.release()

    try:
        from baton.compose import build_engine
        from baton.engine.recovery import recover
        from baton.surfaces import POLICIES

        engine = build_engine(config, store)
        settled = recover(store, POLICIES(config).values())
        if settled:
            log.warning(
                "settled %d run(s) left live by the previous owner as unknown", len(settled)
            )
        anyio.run(_serve_async, engine, config, release, surface)
    except (ConfigError, StateError, DatabaseError, BaseExceptionGroup) as exc:
        if (refusal := store.refusal()) is not None:  # the whole-file check failed
            print(f"baton: {refusal}", file=sys.stderr)
            return EXIT_STATE
        problems = errors_within(exc, ConfigError)  # e.g. the HTTP port cannot be bound
        if not problems:
            raise
        for problem in problems:
            print(f"baton: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    finally:
        release()
    return 0


async def _serve_async(
    engine: Engine, config: Config, release: Callable[[], None], surface: str
) -> None:
    from baton.compose import build_services
    from baton.surfaces import POLICIES, SURFACES

    server = SURFACES[surface](build_services(engine, POLICIES(config)))
    # What exists now (modules, schemas, the server) lives as long as the process: leave it out
    # of every later collection, which would otherwise traverse ~90k objects (a full one took
    # ~20 ms on the event loop, measured under the concurrency benchmark).
    gc.freeze()
    engine.workers.prime()  # the first run should not wait for a worker's imports
    async with anyio.create_task_group() as tg:

        async def refuse_if_corrupt() -> None:
            # The whole-file check runs while we serve; no write happened before its verdict.
            try:
                await asyncio.wrap_future(engine.store.integrity_verdict())
            except StateError as exc:
                log.error("stopping: %s", exc)
                with anyio.CancelScope(shield=True):
                    await engine.shutdown()
                if config.transport == "stdio":  # see stop_on_signal: stdin cannot be cancelled
                    print(f"baton: {exc}", file=sys.stderr)
                    release()
                    sys.stderr.flush()
                    os._exit(EXIT_STATE)
                raise

        tg.start_soon(refuse_if_corrupt)

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("signal %d: stopping live runs, then exiting", signum)
                    with anyio.CancelScope(shield=True):
                        await engine.shutdown()
                    if config.transport == "stdio":
                        # The SDK reads stdin in a thread that no cancellation can interrupt,
                        # so after an orderly shutdown of our own state we leave at once.
                        release()
                        sys.stderr.flush()
                        os._exit(0)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        try:
            if config.transport == "http":
                from baton.transports.http import serve_http

                await serve_http(server, config)
            else:
                from baton.transports.stdio import serve_stdio

                await serve_stdio(server)
        finally:
            with anyio.CancelScope(shield=True):
                await engine.shutdown()
            tg.cancel_scope.cancel()
