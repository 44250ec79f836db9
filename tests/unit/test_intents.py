"""Intent fingerprints (controller.md: request keys, SHA-256 of the intent)."""

from __future__ import annotations

from dataclasses import replace

from baton.engine.intents import Intent

BASE = Intent("start", "/srv/app", "fix the bug", "fake-alpha", "high", "medium", None)


def test_fingerprint_is_stable_sha256_hex() -> None:
    fp = BASE.fingerprint()
    assert fp == replace(BASE).fingerprint()
    assert len(fp) == 64 and int(fp, 16) >= 0


def test_prompt_participates_but_is_not_in_the_fingerprint() -> None:
    other = replace(BASE, prompt="fix the bug!")
    assert other.fingerprint() != BASE.fingerprint()
    assert "fix the bug" not in BASE.fingerprint()


def test_every_field_changes_the_fingerprint() -> None:
    variants = [
        replace(BASE, operation="continue"),
        replace(BASE, target="/srv/other"),
        replace(BASE, model=None),
        replace(BASE, autonomy="off"),
        replace(BASE, reasoning_effort=None),
        replace(BASE, puck_conversation_id="T-1"),
    ]
    prints = {v.fingerprint() for v in variants}
    assert BASE.fingerprint() not in prints
    assert len(prints) == len(variants)
