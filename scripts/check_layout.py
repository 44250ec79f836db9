#!/usr/bin/env python3
"""Check Baton's layering: layer ranks, the rules beyond rank, no import circles, file sizes.

The rules are ``docs/architecture.md`` §1.1 (and the README's "How it is built"):

- a module imports modules of its own layer and of lower layers only (:data:`LAYERS`);
- the engine kernel and Spawnea's service see harnesses only through ``harnesses.registry``;
  the controller and droid-mcp services and ``compose`` may also import ``harnesses.droid``;
- the three services never import each other;
- surfaces never import ``store``, ``supervisor``, ``harnesses``, ``git``, ``panes`` or ``hosts``,
  and surface packages never import each other except ``surfaces.base``;
- the harness folders (``droid``, ``tmux``, ``acp``) never import each other, and of the rest of
  ``harnesses`` only ``harnesses.jsonl``;
- a package ``__init__`` imports only its own submodules;
- one store, one git runner: ``sqlite3`` is imported only under ``store``, and within ``git``
  ``subprocess`` only by ``git.runner`` (:data:`OWNED_IMPORTS`);
- no circles: every strongly connected component of the module graph has one module;
- no file under ``src/`` is over :data:`MAX_LINES` lines.

Every import counts, deferred (inside a function) and ``if TYPE_CHECKING:`` ones too: a circle
through a type-only import is still a circle in the design. ``from pkg import name`` is an edge
to ``pkg.name`` when that is a module, else to ``pkg``.

Each violation prints as ``file:line: <key> (<why>)``. ``<key>`` has no line number, so
``scripts/layout-allow.txt`` can list today's violations; an entry that no longer matches is an
error too, so the list only shrinks. Exit status 1 on any unlisted violation or stale entry.

Usage: ``scripts/check_layout.py [--root DIR] [--allow FILE | --no-allow] [--write-allowlist]``
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MAX_LINES = 400
#: Package prefix -> rank; the longest matching prefix wins (``docs/architecture.md`` §1.1).
LAYERS: dict[str, int] = {
    "baton.cli": 14,
    "baton.daemon": 13,
    "baton.dashboard": 12,
    "baton.transports": 11,
    "baton.surfaces": 10,
    "baton.engine.controller": 9,
    "baton.engine.droid_mcp": 9,
    "baton.engine.spawnea": 9,
    "baton.compose": 9,
    "baton.engine": 8,
    "baton.supervisor": 7,
    "baton.harnesses": 6,
    "baton.session": 5,
    "baton.store": 4,
    "baton.git": 3,
    "baton.panes": 3,
    "baton.hosts": 2,
    "baton.config": 1,
    "baton.config_env": 1,  # the config's environment overrides
    "baton": 0,
}
#: Top-level modules of rank 0: no Baton imports but other leaves.
LEAVES = frozenset(
    {"baton", "baton.errors", "baton.text", "baton.paging", "baton.paths", "baton.aio",
     "baton.runtime", "baton.limits", "baton.regular_files", "baton.proc_identity",
     "baton.__main__"}
)  # fmt: skip
SERVICES = ("baton.engine.controller", "baton.engine.droid_mcp", "baton.engine.spawnea")
DROID_CONTRACTS = ("baton.engine.controller", "baton.engine.droid_mcp", "baton.compose")
HARNESS_FOLDERS = ("baton.harnesses.droid", "baton.harnesses.tmux", "baton.harnesses.acp")
#: Standard-library modules only named places may import: ``name -> (allowed prefixes, within,
#: why)``; the rule applies to modules under ``within`` (``baton``: everywhere). Droid's session
#: index file is a cache of Droid's own files, deleted and rebuilt at will, so it is not Baton's
#: state and stays out of the store (its module docstring says why).
OWNED_IMPORTS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "sqlite3": (
        ("baton.store", "baton.harnesses.droid.local.index_file"),
        "baton",
        "the store is the only module that opens SQLite (and Droid's session-index cache)",
    ),
    "subprocess": (("baton.git.runner",), "baton.git", "git runs only through git.runner.Git"),
}
SURFACES_NEVER = (
    "baton.store", "baton.supervisor", "baton.harnesses", "baton.git", "baton.panes", "baton.hosts",
)  # fmt: skip


def under(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it (by dotted components, never by string prefix)."""
    return module == prefix or module.startswith(prefix + ".")


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    package: bool  # an ``__init__.py``


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int


@dataclass(frozen=True)
class Violation:
    key: str
    where: str  # file:line
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.key} ({self.why})"


def find_modules(src: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted((src / "baton").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        modules[".".join(parts)] = Module(".".join(parts), path, package)
    return modules


def resolve(name: str, modules: dict[str, Module]) -> str | None:
    """The module ``name`` names, or its longest existing prefix (None outside Baton)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports(module: Module, modules: dict[str, Module]) -> list[Edge]:
    tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
    package = module.name if module.package else module.name.rpartition(".")[0]
    edges: list[Edge] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.append(full if full in modules else base)
        for target in targets:
            found = resolve(target, modules) if under(target, "baton") else None
            if found is not None and found != module.name:
                edges.append(Edge(module.name, found, node.lineno))
    return edges


def owned_imports(module: Module) -> list[tuple[str, int]]:
    """``(stdlib module, line)`` for each :data:`OWNED_IMPORTS` entry ``module`` may not import."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            rule = OWNED_IMPORTS.get(top)
            if (
                rule
                and under(module.name, rule[1])
                and not any(under(module.name, allowed) for allowed in rule[0])
            ):
                found.append((top, node.lineno))
    return found


def rank(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for prefix, value in LAYERS.items():
        if under(module, prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), value)
    if best is None or (best[1] == 0 and module not in LEAVES):
        return None
    return best[1]


def _service(module: str) -> str | None:
    return next((s for s in SERVICES if under(module, s)), None)


def _kernel(module: str) -> bool:
    return under(module, "baton.engine") and _service(module) is None


def edge_rules(edge: Edge) -> list[tuple[str, str]]:
    """``(rule, why)`` for every rule beyond rank that ``edge`` breaks."""
    s, t = edge.source, edge.target
    broken: list[tuple[str, str]] = []
    if under(t, "baton.harnesses") and not under(t, "baton.harnesses.registry"):
        droid_ok = any(under(s, c) for c in DROID_CONTRACTS) and under(t, "baton.harnesses.droid")
        if (
            _kernel(s)
            or under(s, "baton.engine.spawnea")
            or _service(s)
            or under(s, "baton.compose")
        ) and not droid_ok:
            broken.append(("registry", "the engine sees harnesses only through harnesses.registry"))
    if (a := _service(s)) and (b := _service(t)) and a != b:
        broken.append(("services", "the services never import each other"))
    if under(s, "baton.surfaces"):
        if any(under(t, p) for p in SURFACES_NEVER):
            broken.append(("surfaces", "surfaces stay above the engine"))
        own = s.split(".")[2] if s.count(".") >= 2 else None
        other = t.split(".")[2] if under(t, "baton.surfaces") and t.count(".") >= 2 else None
        if own and other and own != other and other != "base":
            broken.append(("surfaces", "surface packages never import each other but base"))
    folder = next((f for f in HARNESS_FOLDERS if under(s, f)), None)
    shared = under(t, "baton.harnesses.jsonl")
    if folder and under(t, "baton.harnesses") and not under(t, folder) and not shared:
        broken.append(("harnesses", "harness folders stay apart (harnesses.jsonl is shared)"))
    return broken


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, rest = work[-1]
            if rest:
                nxt = rest.pop(0)
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def check(root: Path) -> list[Violation]:
    src = root / "src"
    modules = find_modules(src)
    violations: list[Violation] = []

    def where(module: str, line: int = 1) -> str:
        return f"{modules[module].path.relative_to(root)}:{line}"

    for path in sorted(p for p in (src / "baton").rglob("*") if p.is_file()):
        if path.suffix in (".pyc",) or "__pycache__" in path.parts:
            continue
        try:
            lines = len(path.read_text(encoding="utf-8").splitlines())
        except UnicodeDecodeError:
            continue
        if lines > MAX_LINES:
            rel = path.relative_to(root)
            violations.append(
                Violation(f"size {rel}", f"{rel}:{MAX_LINES + 1}", f"{lines} lines > {MAX_LINES}")
            )
    all_edges: list[Edge] = []
    for name, module in modules.items():
        if rank(name) is None:
            violations.append(
                Violation(f"unplaced {name}", where(name), "not in check_layout.LAYERS")
            )
        seen: set[tuple[str, str]] = set()
        for stdlib, line in owned_imports(module):
            key = f"owned {name} -> {stdlib}"
            if ("owned", key) not in seen:
                seen.add(("owned", key))
                violations.append(Violation(key, where(name, line), OWNED_IMPORTS[stdlib][2]))
        for edge in imports(module, modules):
            all_edges.append(edge)
            ours, theirs = rank(edge.source), rank(edge.target)
            found: list[tuple[str, str]] = []
            if ours is not None and theirs is not None and theirs > ours:
                found.append(("upward", f"rank {ours} imports rank {theirs}"))
            found += edge_rules(edge)
            if module.package and not under(edge.target, name):
                found.append(("init", "a package __init__ imports only its own submodules"))
            for rule, why in found:
                key = f"{rule} {edge.source} -> {edge.target}"
                if (rule, key) not in seen:
                    seen.add((rule, key))
                    violations.append(Violation(key, where(name, edge.line), why))
    first_edge = {(e.source, e.target): e for e in reversed(all_edges)}
    for component in cycles(all_edges):
        members = set(component)
        line = next(
            (e.line for (s, t), e in first_edge.items() if s == component[0] and t in members), 1
        )
        violations.append(
            Violation("cycle " + " ".join(component), where(component[0], line), "an import circle")
        )
    return violations


def read_allowlist(path: Path) -> list[str]:
    if not path.exists():
        return []
    entries = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        entry = raw.split("#", 1)[0].strip()
        if entry:
            entries.append(entry)
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument(
        "--allow", type=Path, default=None, help="allowlist (default: scripts/layout-allow.txt)"
    )
    parser.add_argument("--no-allow", action="store_true", help="ignore the allowlist")
    parser.add_argument("--write-allowlist", action="store_true", help="write today's violations")
    args = parser.parse_args(argv)
    allow_path = args.allow or args.root / "scripts" / "layout-allow.txt"
    violations = check(args.root)
    if args.write_allowlist:
        header = (
            "# Layering violations of today, allowed until the package that owns each removes it\n"
            "# (docs/architecture.md). One key per line; scripts/check_layout.py fails on a stale\n"
            "# entry.\n"
        )
        keys = sorted({v.key for v in violations})
        allow_path.write_text(header + "".join(f"{k}\n" for k in keys), encoding="utf-8")
        print(f"wrote {len(keys)} entries to {allow_path}")
        return 0
    allowed = [] if args.no_allow else read_allowlist(allow_path)
    keys = {v.key for v in violations}
    new = [v for v in violations if v.key not in allowed]
    stale = [a for a in allowed if a not in keys]
    for violation in new:
        print(violation)
    for entry in stale:
        print(f"{allow_path.name}: stale entry (no longer a violation; delete it): {entry}")
    listed = len(violations) - len(new)
    print(
        f"layout: {len(new)} violation(s), {len(stale)} stale allowlist entr(ies), "
        f"{listed} allowed",
        file=sys.stderr,
    )
    return 1 if new or stale else 0


if __name__ == "__main__":
    sys.exit(main())
