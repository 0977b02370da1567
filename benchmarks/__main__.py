"""Run the benchmark modules (``benchmarks/*.py``) in quick mode: ``python -m benchmarks [NAME ...]``.

``--list`` names them; ``--help`` says this and runs nothing; with no NAME every one runs (``make bench``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def modules() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    names = modules()
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0],
                                 epilog="one in full: python -m benchmarks.NAME (each takes --help)")
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all): {', '.join(names)}")
    ap.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    a = ap.parse_args(argv)
    if a.list:
        print("\n".join(names))
        return 0
    unknown = [n for n in a.names if n not in names]
    if unknown:
        ap.error(f"unknown benchmark {', '.join(unknown)}; benchmarks are: {', '.join(names)}")
    failed = []
    for name in a.names or names:
        print(f"=== benchmarks.{name} --quick", flush=True)
        rc = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--quick"], cwd=HERE.parent).returncode
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
