"""No module of the project is longer than :data:`BUDGET` lines: a longer one holds more than one job and is cut
along them (ARCHITECTURE.md, "Where things live"). The few still over are listed, each to be cut."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 600
DIRS = ("openpod_core", "infra", "platform_constructs", "node_agent", "training", "observability", "benchmarks",
        "tools", "tests")
# Over the budget today; an entry goes when its module is cut (the test below says when).
OVER_BUDGET = {
    "infra/deploy/plan.py",              # the template diff and its renderers
    "training/cli.py",
    "training/checkpoint/storage.py",
    "benchmarks/goodput_at_scale.py",
    "tests/training/test_checkpoint.py",
    "tests/cdk/test_platform.py",
}


def _lengths() -> dict[str, int]:
    files = [ROOT / "app.py", *(f for d in DIRS for f in sorted((ROOT / d).rglob("*.py")))]
    return {str(f.relative_to(ROOT)): len(f.read_text().splitlines()) for f in files}


def test_no_module_is_over_the_line_budget():
    over = {f: n for f, n in _lengths().items() if n > BUDGET and f not in OVER_BUDGET}
    assert not over, f"over {BUDGET} lines (cut them along their jobs): {over}"


def test_every_listed_module_is_still_over_the_budget():
    lengths = _lengths()
    done = sorted(f for f in OVER_BUDGET if lengths.get(f, 0) <= BUDGET)
    assert not done, f"within {BUDGET} lines now (or gone): drop them from OVER_BUDGET: {done}"
