"""Droid's user settings and ``droid exec --help`` models, reduced to what ``droid_models`` shows.

Sources: ``shared/spec/droid-mcp.md`` ("What it never does": custom models reduced to an allowlist
of fields, ``baseUrl`` reduced to its host, never an API key) and WAVE2 §7.2 / §4.4 (measured on CLI
0.225.2: ``exec --help`` prints ``Available Models`` with a ``(default)`` marker and ``Model
details`` with each model's efforts, keyed by display name; under ``FACTORY_AIRGAP_ENABLED=1``
both sections are empty).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from baton.regular_files import read_regular

Json = dict[str, Any]

#: Custom-model fields that may be shown. Everything else (``apiKey``, ``extraHeaders``,
#: ``extraArgs``, unknown future keys) is dropped, since any of them may carry a secret.
CUSTOM_MODEL_FIELDS: tuple[str, ...] = (
    "id",
    "model",
    "displayName",
    "provider",
    "baseUrl",
    "maxOutputTokens",
    "noImageSupport",
)
_MAX_SETTINGS_BYTES = 4 * 1024 * 1024


def read_user_settings(factory_home: Path) -> Json | None:
    """``<factory_home>/settings.json`` as a dict; None if missing, unreadable or not an object."""
    return read_settings_file(factory_home / "settings.json")


def read_settings_file(path: Path) -> Json | None:
    """A Droid settings file (user settings, or a runtime ``--settings`` file) as a dict; None if
    missing, unreadable, not a regular file (a FIFO is never opened for a blocking read), over
    the size bound or not an object. A symlink to a regular file is followed (dotfiles)."""
    try:
        data = read_regular(path, _MAX_SETTINGS_BYTES, follow_symlinks=True)
    except OSError:
        return None
    if len(data) > _MAX_SETTINGS_BYTES:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def base_url_host(url: object) -> str | None:
    """``https://u:pw@api.example.com:8443/v1`` → ``api.example.com:8443``; None if unparsable."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if not host:
        return None
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return host if port is None else f"{host}:{port}"


def custom_models(settings: Json | None) -> list[Json]:
    """The ``customModels`` of a settings dict, each reduced to :data:`CUSTOM_MODEL_FIELDS`.

    ``baseUrl`` becomes its host (``host[:port]``, no scheme, credentials or path). Fields of an
    unexpected type are dropped; entries that are not objects are skipped. The order is kept.
    """
    raw = settings.get("customModels") if settings else None
    out: list[Json] = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict):
            continue
        shown: Json = {}
        for key in CUSTOM_MODEL_FIELDS:
            value = entry.get(key)
            if key == "baseUrl":
                value = base_url_host(value)
            if isinstance(value, bool) or (isinstance(value, str | int) and value != ""):
                shown[key] = value
        out.append(shown)
    return out


def default_model(settings: Json | None) -> str | None:
    """``sessionDefaultSettings.model`` of a settings dict, if it is a non-empty string."""
    defaults = settings.get("sessionDefaultSettings") if settings else None
    model = defaults.get("model") if isinstance(defaults, dict) else None
    return model if isinstance(model, str) and model else None


@dataclass(frozen=True)
class HelpModel:
    """One model from ``droid exec --help``.

    ``supports_reasoning``, the efforts and the default effort are None/empty when the
    ``Model details`` section has no line for the model's display name.
    """

    id: str
    display_name: str
    deprecated: bool
    is_default: bool
    supports_reasoning: bool | None
    supported_reasoning_efforts: tuple[str, ...]
    default_reasoning_effort: str | None

    def to_json(self) -> Json:
        """``{id, displayName, deprecated, default, supportsReasoning,
        supportedReasoningEfforts, defaultReasoningEffort}``."""
        return {
            "id": self.id,
            "displayName": self.display_name,
            "deprecated": self.deprecated,
            "default": self.is_default,
            "supportsReasoning": self.supports_reasoning,
            "supportedReasoningEfforts": list(self.supported_reasoning_efforts),
            "defaultReasoningEffort": self.default_reasoning_effort,
        }


_ENTRY = re.compile(r"^\s+(\S+)\s{2,}(\S.*?)\s*$")
_DETAIL = re.compile(
    r"^\s*-\s+(?P<name>.+?):\s+supports reasoning:\s*(?P<yes>Yes|No);\s*supported:\s*"
    r"\[(?P<efforts>[^\]]*)\];\s*default:\s*(?P<default>\S+)\s*$"
)
_DEFAULT_MARK = " (default)"
_DEPRECATED_MARK = " [Deprecated]"


def _section(lines: list[str], title: str) -> list[str]:
    """Indented lines under ``title:`` up to the next unindented line."""
    out: list[str] = []
    inside = False
    for line in lines:
        if not inside:
            inside = line.strip() == f"{title}:" and not line.startswith((" ", "\t"))
            continue
        if line.strip() and not line.startswith((" ", "\t")):
            break
        if line.strip():
            out.append(line)
    return out


def parse_exec_help(text: str) -> tuple[HelpModel, ...]:
    """The models listed by ``droid exec --help``, in the order printed.

    ``Available Models`` lines are ``<id>  <display name>[ [Deprecated]][ (default)]``;
    ``Model details`` lines are ``- <display name>: supports reasoning: Yes|No; supported:
    [a, b]; default: x``, joined to the models by display name. Output without those sections
    (for example under air-gap) gives an empty tuple.
    """
    lines = text.splitlines()
    details: dict[str, tuple[bool, tuple[str, ...], str]] = {}
    for line in _section(lines, "Model details"):
        match = _DETAIL.match(line)
        if match and match["name"] not in details:
            efforts = tuple(e.strip() for e in match["efforts"].split(",") if e.strip())
            details[match["name"]] = (match["yes"] == "Yes", efforts, match["default"])
    models: list[HelpModel] = []
    for line in _section(lines, "Available Models"):
        match = _ENTRY.match(line)
        if not match:
            continue
        model_id, label = match.group(1), match.group(2)
        is_default = label.endswith(_DEFAULT_MARK)
        if is_default:
            label = label[: -len(_DEFAULT_MARK)]
        deprecated = label.endswith(_DEPRECATED_MARK)
        detail = details.get(label)
        models.append(
            HelpModel(
                id=model_id,
                display_name=label[: -len(_DEPRECATED_MARK)] if deprecated else label,
                deprecated=deprecated,
                is_default=is_default,
                supports_reasoning=detail[0] if detail else None,
                supported_reasoning_efforts=detail[1] if detail else (),
                default_reasoning_effort=detail[2] if detail else None,
            )
        )
    return tuple(models)


def help_default_model(models: tuple[HelpModel, ...]) -> str | None:
    """The id marked ``(default)`` in :func:`parse_exec_help` output, if any."""
    return next((m.id for m in models if m.is_default), None)
