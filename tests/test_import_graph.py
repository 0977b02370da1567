"""No import circles among the project's modules, counting imports inside functions too, nor between infra's
packages (spec, cli, app, deploy, governance) taken each as one node.

A function-level import that closes a circle still ties the modules together (neither can be read, moved or
tested apart); only ``if TYPE_CHECKING:`` imports are left out. Static (ast), so it costs no imports.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("openpod_core", "infra", "platform_constructs", "node_agent", "training", "observability", "benchmarks")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = f
    return mods


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_lines(tree)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                # `from pkg import submodule` depends on the submodule, `from pkg import name` on pkg
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_function_level_imports():
    g = import_graph()
    assert "infra.cli.common" in g["infra.cli.drain"]          # module level
    assert "infra.governance.jobset" in g["infra.cli.main"]     # inside a command function


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, "import circles (each line one circle):\n" + "\n".join(" <-> ".join(c) for c in found)


# infra's packages, each one node: a module of one importing a module of another that imports back (even through
# other packages' modules) is a circle between the packages, though no module circle.
INFRA_PACKAGES = ("infra.spec", "infra.cli", "infra.app", "infra.deploy", "infra.governance")
# Module imports left out of the package graph, each with why; an entry goes when its import does.
PACKAGE_EDGES_ALLOWED = {
    # admission reads the node agent's namespace and name from node_agent.deploy, which reads the pod baseline
    # from infra.governance.pod_baseline; those names belong in openpod_core
    ("infra.governance.admission", "node_agent.deploy"),
}


def _package(mod: str) -> str:
    return next((p for p in INFRA_PACKAGES if mod == p or mod.startswith(p + ".")), mod)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        node = out.setdefault(_package(mod), set())
        node.update(_package(d) for d in deps if (mod, d) not in PACKAGE_EDGES_ALLOWED and _package(d) != _package(mod))
    return out


def test_infra_modules_live_in_the_packages():
    """Every infra module sits in one of the packages (no new module straight under infra/)."""
    loose = [m for m in import_graph()
             if m.startswith("infra.") and _package(m) == m and m not in (*INFRA_PACKAGES, "infra.__main__")]
    assert not loose, f"modules outside {', '.join(INFRA_PACKAGES)}: {loose}"


def test_no_circles_between_infra_packages():
    found = circles(package_graph(import_graph()))
    assert not found, "circles between packages (each line one circle):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_package_graph_sees_a_circle_between_packages():
    graph = {m: set(d) for m, d in import_graph().items()}
    graph["infra.spec.warnings"].add("infra.cli.docs")   # cli.docs imports spec.docs: no module circle
    assert not circles(graph)
    assert any({"infra.cli", "infra.spec"} <= set(c) for c in circles(package_graph(graph)))


def test_every_allowed_package_edge_is_still_there():
    gone = [edge for edge in PACKAGE_EDGES_ALLOWED if edge[1] not in import_graph()[edge[0]]]
    assert not gone, f"drop these from PACKAGE_EDGES_ALLOWED, the imports are gone: {gone}"
