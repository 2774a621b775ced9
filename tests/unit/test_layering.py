"""The package's shape, held by its imports: each stage folder depends only on what it must, no
module imports itself back through others, no module outgrows a read, and every file a
docstring or a doc names is in the repository."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "changelake"
MAX_LINES = 400
# Folders of the runtime that may start and stop the local stack (the CLI's own commands) or
# that exist for it (benchmarks, chaos runs, the demo).
STACK_USERS = {"stack", "bench", "chaos", "demo", "commands", "cli"}
# folder → folders it must not import: the writer never reaches into the read side, and the
# table format depends on no stage.
FORBIDDEN = {
    "apply": {"read"},
    "lake": {"apply", "read", "sinks", "views", "serve", "verify", "capture", "search"},
    "sinks": {"read", "apply"},
    "capture": {"read", "apply"},
    "changelog": {"read", "apply", "sinks"},
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _folder(module: str) -> str:
    """The stage folder (`apply`), or the top-level module's own name (`settings`)."""
    return module.split(".")[1] if "." in module else module


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """The package's modules `path` imports, wherever in the file (a function-local or
    type-only import is a dependency too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("changelake"):
            assert node.module is not None
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("changelake")}
    return {m for m in found if m in MODULES}


GRAPH = {m: _imports(p) - {m} for m, p in MODULES.items()}


def test_no_stage_imports_what_it_must_not() -> None:
    wrong = [
        f"{m} imports {d}"
        for m, deps in GRAPH.items()
        for d in deps
        if _folder(d) in FORBIDDEN.get(_folder(m), set())
    ]
    assert wrong == []


def test_only_the_cli_benchmarks_and_chaos_reach_the_local_stack() -> None:
    wrong = [
        f"{m} imports {d}"
        for m, deps in GRAPH.items()
        for d in deps
        if _folder(d) == "stack" and _folder(m) not in STACK_USERS
    ]
    assert wrong == []


def test_the_benchmark_and_chaos_are_reached_only_by_their_commands() -> None:
    """The pipeline image leaves them out (.dockerignore): nothing the pipeline runs imports
    them, only the CLI's `bench` and `chaos` commands, which say so when they are absent."""
    wrong = [
        f"{m} imports {d}"
        for m, deps in GRAPH.items()
        for d in deps
        if _folder(d) in {"bench", "chaos"} and _folder(m) not in {"bench", "chaos", "commands"}
    ]
    assert wrong == []


def test_no_module_imports_itself_back() -> None:
    """No cycle among modules (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in GRAPH[node]:
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            if component:
                cycles.append(sorted([node, *component]))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []


def test_no_module_outgrows_a_read() -> None:
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


_FILE_REF = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)*[a-z_0-9]+\.py)\b")
_DOCUMENTS = (".py", ".md", ".yml", ".toml", ".xml")


def _tracked() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    return [f for f in listed.stdout.split() if f.endswith(_DOCUMENTS)]


def test_every_file_a_docstring_or_doc_names_exists() -> None:
    """`sinks/delta.py`, `lake/table.py`: found from the repository's root, the package, the
    naming file's folder, or the tests (a bare file name anywhere in them)."""
    everywhere = {
        p.name for folder in ("changelake", "tests") for p in (ROOT / folder).rglob("*.py")
    }
    missing = []
    for name in _tracked():
        source = ROOT / name
        if name.startswith(("docs/bench/", "tests/")) or not source.exists():
            continue  # reports of earlier runs quote the tree as it was; tests name made-up files
        for ref in _FILE_REF.findall(source.read_text()):
            bases = (ROOT, PACKAGE, source.parent, ROOT / "tests")
            if any((base / ref).exists() for base in bases):
                continue
            if "/" not in ref and ref in everywhere:
                continue
            missing.append(f"{name}: {ref}")
    assert missing == []
