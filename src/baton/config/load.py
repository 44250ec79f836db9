"""Loading the host configuration: the file, the embedded defaults and fallbacks, validation
with every problem on one line, canonical roots, and the checks of files it names."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import ValidationError

from baton.config.model import Config
from baton.errors import ConfigError
from baton.hosts.config import LOCAL_HOST_ID, check_hosts_at_startup


def default_state_directory() -> str:
    """``$XDG_STATE_HOME/baton``, else ``~/.local/state/baton`` (``controller-tools.md``)."""
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "baton")
    return platformdirs.user_state_dir("baton", appauthor=False)


def _embedded_defaults() -> dict[str, Any]:
    return {
        "approvedDirectories": [os.getcwd()],
        "stateDirectory": default_state_directory(),
    }


_UNSET_DROID = "/droidPath-not-set"
"""Stands in for an absent ``droidPath`` while the rest of the config is validated, so the
PATH lookup (and its error) comes only after every other problem has been reported."""


def load_config(
    path: str | None, fallbacks: Mapping[str, Any] | None = None, *, need_droid: bool = True
) -> Config:
    """Load, validate and canonicalise the host configuration.

    ``fallbacks`` (e.g. :func:`baton.config_env.droid_mcp_fallbacks`) replace embedded defaults
    for keys the file leaves out. ``path`` None means the embedded defaults: the current
    directory as the only approved root, the platform state directory and ``droid`` from
    ``PATH``. Everything else is validated before ``droid`` is looked up on ``PATH``, so a config
    error is never reported as a missing Droid CLI. ``need_droid=False`` (commands that start no
    agent: ``baton approvals``, ``baton dashboard-url``) skips the Droid checks; ``droidPath`` is
    then unchecked.

    Raises
    ------
    ConfigError
        With one line naming every problem of the keys (unknown keys, relative paths,
        defaultAutonomy above maxAutonomy, http without tokenFile, a non-loopback host without
        allowNonLoopbackHost); else the first of: a missing approved root, a missing settings
        file, a token file that is not private, no droid CLI (droidPath unset and none on PATH),
        a droidPath that is not executable.
    """
    raw: dict[str, Any] = {**_embedded_defaults(), **(fallbacks or {})}
    if path is not None:
        if not os.path.isabs(path):
            raise ConfigError(f"config path must be absolute: {path!r}")
        try:
            with open(path, encoding="utf-8") as handle:
                loaded = json.load(handle)
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config {path} is not valid JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"config {path} must be a JSON object")
        raw = {**{k: v for k, v in raw.items() if k not in loaded}, **loaded}
        if "defaultAutonomy" not in loaded and "maxAutonomy" in loaded and fallbacks:
            raw.pop("defaultAutonomy", None)  # a fallback default never exceeds the file's cap
    droid_unset = "droidPath" not in raw
    if droid_unset:
        raw["droidPath"] = _UNSET_DROID
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid config: {config_problems(exc)}") from None
    config = _canonicalise(config)
    if not need_droid:
        return config
    if droid_unset:
        droid = shutil.which("droid")
        if droid is None:
            raise ConfigError("droid CLI not found on PATH; set droidPath in the config")
        config = config.model_copy(update={"droidPath": droid})
    return _check_droid(config)


def config_problems(exc: ValidationError) -> str:
    """Every problem of a failed :class:`Config` validation on one line, each naming its key."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {_short(err)}" for err in exc.errors()
    )


def _short(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key"
    return str(err["msg"]).removeprefix("Value error, ")


def _canonicalise(config: Config) -> Config:
    roots: list[str] = []
    for root in config.approvedDirectories:
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise ConfigError(f"approved directory does not exist: {root}")
        roots.append(real)
    if config.droidSettingsFile is not None and not os.path.isfile(config.droidSettingsFile):
        raise ConfigError(f"droidSettingsFile does not exist: {config.droidSettingsFile}")
    if config.tokenFile is not None:
        check_private_file(Path(config.tokenFile), what="tokenFile")
    for project in config.spawnea.projects:
        if project.hostId != LOCAL_HOST_ID:
            continue  # a path on another host: checked on that host when it is used
        real = os.path.realpath(project.path)
        if not os.path.isdir(real):
            raise ConfigError(f"spawnea project {project.id!r}: {project.path} is not a directory")
        if not any(os.path.commonpath([real, root]) == root for root in roots):
            raise ConfigError(
                f"spawnea project {project.id!r}: {project.path} is outside the approved roots"
            )
    check_hosts_at_startup(config.spawnea)
    return config.model_copy(update={"approvedDirectories": roots})


def _check_droid(config: Config) -> Config:
    if not (os.path.isfile(config.droidPath) and os.access(config.droidPath, os.X_OK)):
        raise ConfigError(f"droidPath is not an executable file: {config.droidPath}")
    return config


def check_private_file(path: Path, *, what: str) -> None:
    """Refuse a secret file that is missing or readable by others.

    Raises
    ------
    ConfigError
        If the file is missing, not a regular file, or its mode allows group/other access.
    """
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{what} {path} is not a regular file")
    if info.st_mode & 0o077:
        raise ConfigError(
            f"{what} {path} has mode {stat.S_IMODE(info.st_mode):04o}; run: chmod 600 {path}"
        )
