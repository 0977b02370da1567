"""Run every benchmark module (``benchmarks/*.py``) with ``--quick``: ``python -m benchmarks``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    modules = sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))
    failed = []
    for name in modules:
        print(f"=== benchmarks.{name} --quick", flush=True)
        rc = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--quick"], cwd=HERE.parent).returncode
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
