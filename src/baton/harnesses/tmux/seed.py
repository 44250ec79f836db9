"""First-run configuration written into an agent's HOME, so its TUI opens straight to the prompt.

Only ever into the HOME the operator chose for the agent (``agentHome``): an operator's own HOME
is theirs. Writes merge into what is there (never drop a key the agent or operator wrote), are
atomic (temporary file + rename) and keep the file private (0600).

The settings themselves are the measured minimum per agent (``shared/reference/tmux-agents.md``
§1): Claude Code's onboarding, trust and API-key dialogs; Codex's project trust and model-migration
popup; Droid's trust dialog and logo animation.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baton.regular_files import NotRegularFile, read_regular

Json = dict[str, Any]


#: A settings file to merge into is read up to this size.
_MAX_JSON_BYTES = 4 * 1024 * 1024


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _merge(into: Json, extra: Mapping[str, Any]) -> bool:
    changed = False
    for key, value in extra.items():
        here = into.get(key)
        if isinstance(value, Mapping) and isinstance(here, dict):
            changed = _merge(here, value) or changed
        elif isinstance(value, list) and isinstance(here, list):
            missing = [v for v in value if v not in here]
            here.extend(missing)
            changed = changed or bool(missing)
        elif key not in into:
            into[key] = json.loads(json.dumps(value))
            changed = True
    return changed


def merge_json(path: Path, extra: Mapping[str, Any]) -> bool:
    """Add ``extra``'s keys (recursively; lists gain missing items) to the JSON object in ``path``
    without overwriting existing values. Returns True if the file was written.

    Raises
    ------
    ValueError
        If ``path`` exists but is not a regular file, is over 4 MiB or does not hold a JSON
        object (it is left untouched).
    """
    current: Json = {}
    if path.exists():
        try:  # the agent's own settings file: never a blocking read of a FIFO put there
            data = read_regular(path, _MAX_JSON_BYTES, follow_symlinks=True)
        except NotRegularFile:
            raise ValueError(f"{path} is not a regular file") from None
        if len(data) > _MAX_JSON_BYTES:
            raise ValueError(f"{path} is larger than {_MAX_JSON_BYTES} bytes")
        loaded = json.loads(data.decode("utf-8") or "{}")
        if not isinstance(loaded, dict):
            raise ValueError(f"{path} does not hold a JSON object")
        current = loaded
    if not _merge(current, extra) and path.exists():
        return False
    _write_private(path, json.dumps(current, indent=2) + "\n")
    return True


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def merge_toml(path: Path, table: tuple[str, ...], key: str, value: str) -> bool:
    """Set ``table.key = value`` (a string) in the TOML file ``path`` if it is not set yet.

    Python has no TOML writer in the standard library; this one only ever *adds* a line: after
    the table's header when the table exists in the canonical form this function writes, or as a
    new table at the end. Returns True if the file was written.

    Raises
    ------
    ValueError
        If the file is not valid TOML, or the table exists in a form this writer cannot place a
        key into (the file is left untouched).
    """
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        data: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    node = data
    for part in table:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and key in node:
        return False
    header = "[" + ".".join(_toml_key(p) for p in table) + "]"
    line = f"{_toml_key(key)} = {json.dumps(value)}"
    lines = text.splitlines()
    if node is None:
        addition = ("\n" if text and not text.endswith("\n") else "") + f"\n{header}\n{line}\n"
        text = text + addition
    else:
        try:
            at = [candidate.strip() for candidate in lines].index(header)
        except ValueError as exc:
            raise ValueError(f"{path}: cannot add {key!r} to table {header}") from exc
        lines.insert(at + 1, line)
        text = "\n".join(lines) + "\n"
    tomllib.loads(text)  # never write a file the agent could not read
    _write_private(path, text)
    return True


def codex_model_upgrade(executable: str, env: Mapping[str, str], model: str) -> str | None:
    """The model Codex's catalogue offers as an upgrade of ``model`` (what its "Meet ..." popup
    proposes), from ``codex debug models`` (about 0.2 s), or None. Blocking."""
    try:
        done = subprocess.run(
            [executable, "debug", "models"],
            env=dict(env),
            capture_output=True,
            timeout=15,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        catalogue = json.loads(done.stdout or b"{}")
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    models = catalogue.get("models") if isinstance(catalogue, dict) else catalogue
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, dict) and entry.get("slug") == model:
            upgrade = entry.get("upgrade")
            target = upgrade.get("model") if isinstance(upgrade, dict) else None
            return target if isinstance(target, str) else None
    return None
