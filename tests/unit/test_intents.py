"""Intent fingerprints (controller.md: request keys, SHA-256 of the intent)."""

from __future__ import annotations

from dataclasses import replace

from baton.engine.intents import Intent

BASE = Intent("start", "/srv/app", "fix the bug", "fake-alpha", "high", "medium", None)


def test_fingerprint_is_pinned_across_versions() -> None:
    """Fingerprints are stored durably: a change to the canonical JSON would turn every stored
    key into a conflict after an upgrade. The value is what Baton 0.1 (1e82585) computed."""
    assert BASE.fingerprint() == "6d406afd2b73dd9db7962c5127c3277e50c7fbd37cb4e809713557b50e5aeff2"


def test_prompt_participates_in_the_fingerprint() -> None:
    other = replace(BASE, prompt="fix the bug!")
    assert other.fingerprint() != BASE.fingerprint()


def test_every_field_changes_the_fingerprint() -> None:
    variants = [
        replace(BASE, operation="continue"),
        replace(BASE, target="/srv/other"),
        replace(BASE, model=None),
        replace(BASE, autonomy="off"),
        replace(BASE, reasoning_effort=None),
        replace(BASE, reply_recipient="T-1"),
    ]
    prints = {v.fingerprint() for v in variants}
    assert BASE.fingerprint() not in prints
    assert len(prints) == len(variants)
