"""The engine carries the one runtime beside its old attributes (P1), wired to its own parts."""

from __future__ import annotations

from pathlib import Path

from baton.config import Config
from baton.engine.admission import CLEANUP_SLACK_S
from baton.engine.engine import Engine
from baton.store import Store


def test_the_engine_wires_admission_the_live_table_and_keys(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    store = Store(state)
    store.open()
    try:
        config = Config(
            approvedDirectories=[str(tmp_path / "root")],
            stateDirectory=str(state),
            droidPath="/bin/false",
            cancelGraceMs=1500,
        )
        engine = Engine(config, store)
        assert engine.sessions.admission is engine.admission and len(engine.sessions) == 0
        assert engine.admission.cleanup_wait_s == 1.5 + CLEANUP_SLACK_S
        assert engine.keys.epoch == engine.epoch  # daemon-lifetime keys live as long as it
    finally:
        store.close()
