"""The layering checker (``scripts/check_layout.py``): the tree keeps its layers, and each rule
catches what it forbids (on small trees made here, so the checks are shown able to fail)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKER = ROOT / "scripts" / "check_layout.py"


def run(root: Path, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, str(CHECKER), "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout


def test_the_tree_keeps_its_layers() -> None:
    """No violation beyond ``scripts/layout-allow.txt``, and no stale entry in it (the list of
    today's violations only shrinks, as each package removes its own)."""
    code, out = run(ROOT)
    assert code == 0, out


def tree(tmp: Path, files: dict[str, str]) -> Path:
    for name, text in {"baton/__init__.py": "", **files}.items():
        path = tmp / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp


PACKAGES = {
    f"baton/{p}/__init__.py": ""
    for p in (
        "engine", "engine/droid_mcp", "engine/spawnea", "engine/controller", "harnesses",
        "harnesses/droid", "harnesses/tmux", "surfaces", "surfaces/spawnea", "surfaces/droid_mcp",
        "store", "session", "dashboard",
    )
}  # fmt: skip


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            **PACKAGES,
            "baton/errors.py": "",
            "baton/session/spec.py": "from baton import errors\n",
            "baton/harnesses/registry.py": "from baton.harnesses.droid import harness\n",
            "baton/harnesses/droid/harness.py": (
                "from baton.session.spec import x\nfrom baton.harnesses import jsonl\n"
            ),
            "baton/harnesses/jsonl.py": "",
            # A re-exporting __init__ is not a circle: ``from pkg import name`` names the module.
            "baton/store/__init__.py": "from baton.store.runs import Runs\n",
            "baton/store/runs.py": "from baton.store import rows\n",
            "baton/store/rows.py": "import sqlite3\n",  # the store owns SQLite
            "baton/git/runner.py": "import subprocess\n",  # and the runner git
            "baton/engine/kernel.py": (
                "from baton.harnesses import registry\nfrom . import admission\n"
            ),
            "baton/engine/admission.py": "from baton.store import runs\n",
            "baton/engine/droid_mcp/service.py": "from baton.harnesses.droid.harness import H\n",
            "baton/surfaces/spawnea/server.py": (
                "from baton.surfaces import base\nfrom baton.engine import kernel\n"
            ),
            "baton/surfaces/base.py": "",
        },
    )
    code, out = run(root, "--no-allow")
    assert code == 0, out


@pytest.mark.parametrize(
    ("files", "key"),
    [
        ({"baton/store/x.py": "from baton.engine import y\n", "baton/engine/y.py": ""},
         "upward baton.store.x -> baton.engine.y"),
        ({"baton/engine/k.py": "def f():\n    from baton.engine.droid_mcp import s\n",
          "baton/engine/droid_mcp/s.py": ""},
         "upward baton.engine.k -> baton.engine.droid_mcp.s"),
        ({"baton/engine/k.py": "from baton.harnesses.tmux import t\n",
          "baton/harnesses/tmux/t.py": ""},
         "registry baton.engine.k -> baton.harnesses.tmux.t"),
        ({"baton/engine/spawnea/s.py": "from baton.harnesses.droid import d\n",
          "baton/harnesses/droid/d.py": ""},
         "registry baton.engine.spawnea.s -> baton.harnesses.droid.d"),
        ({"baton/engine/droid_mcp/a.py": "from baton.engine.spawnea import b\n",
          "baton/engine/spawnea/b.py": ""},
         "services baton.engine.droid_mcp.a -> baton.engine.spawnea.b"),
        ({"baton/surfaces/spawnea/s.py": "from baton.store import q\n", "baton/store/q.py": ""},
         "surfaces baton.surfaces.spawnea.s -> baton.store.q"),
        ({"baton/surfaces/spawnea/s.py": "from baton.surfaces.droid_mcp import shapes\n",
          "baton/surfaces/droid_mcp/shapes.py": ""},
         "surfaces baton.surfaces.spawnea.s -> baton.surfaces.droid_mcp.shapes"),
        ({"baton/harnesses/tmux/t.py": "from baton.harnesses.droid import d\n",
          "baton/harnesses/droid/d.py": ""},
         "harnesses baton.harnesses.tmux.t -> baton.harnesses.droid.d"),
        ({"baton/harnesses/droid/__init__.py": "from baton.session import spec\n",
          "baton/session/spec.py": ""},
         "init baton.harnesses.droid -> baton.session.spec"),
        ({"baton/engine/a.py": "import typing\nif typing.TYPE_CHECKING:\n    from . import b\n",
          "baton/engine/b.py": "from .a import x\n"},
         "cycle baton.engine.a baton.engine.b"),
        ({"baton/engine/big.py": "x = 1\n" * 401}, "size src/baton/engine/big.py"),
        ({"baton/engine/k.py": "def f():\n    import sqlite3\n"},
         "owned baton.engine.k -> sqlite3"),
        ({"baton/git/diff.py": "from subprocess import run\n", "baton/git/runner.py": ""},
         "owned baton.git.diff -> subprocess"),
        ({"baton/newthing.py": ""}, "unplaced baton.newthing"),
    ],
    ids=["upward", "deferred-upward", "registry", "spawnea-registry", "services", "surface-store",
         "surface-surface", "harness-folders", "init", "type-only-cycle", "size", "owned-sqlite",
         "owned-git-runner", "unplaced"],
)  # fmt: skip
def test_each_rule_catches_its_violation(files: dict[str, str], key: str, tmp_path: Path) -> None:
    root = tree(tmp_path, {**PACKAGES, **files})
    code, out = run(root, "--no-allow")
    assert code == 1 and key in out, out
    line = next(line for line in out.splitlines() if key in line)
    assert line.startswith("src/baton/") and line.split(":")[1].isdigit()  # file:line


def test_an_allowlist_allows_and_a_stale_entry_fails(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {**PACKAGES, "baton/store/x.py": "from baton.engine import y\n", "baton/engine/y.py": ""},
    )
    allow = tmp_path / "allow.txt"
    allow.write_text("# today\nupward baton.store.x -> baton.engine.y\n")
    assert run(root, "--allow", str(allow))[0] == 0
    allow.write_text(
        "upward baton.store.x -> baton.engine.y\nupward baton.store.gone -> baton.engine.y\n"
    )
    code, out = run(root, "--allow", str(allow))
    assert code == 1 and "stale entry" in out and "baton.store.gone" in out
