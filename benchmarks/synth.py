"""How long synthesizing the platform takes, for the default and the large example.

Each measurement runs in a fresh interpreter (as ``cdk synth`` does), so it
includes starting the jsii kernel. Reported per example: building the construct
tree, synthesizing with the cdk-nag gate, and synthesizing without it, plus
the large/default ratio. ``--quick`` takes one sample instead of five.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
from infra.spec.loading import load_spec
from infra.app.stacks import build_app
t1 = time.perf_counter()
spec = load_spec(sys.argv[1])
app, stack = build_app(spec, outdir=sys.argv[2], checks=sys.argv[3] == "1")
t2 = time.perf_counter()
app.synth()
t3 = time.perf_counter()
t = json.load(open(f"{sys.argv[2]}/{stack.stack_name}.template.json"))
print(json.dumps({"import": t1 - t0, "build": t2 - t1, "synth": t3 - t2, "resources": len(t["Resources"])}))
"""


def measure(example: str, checks: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
           "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT / "examples" / f"{example}.yaml"), out,
                               "1" if checks else "0"], capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"synth of {example} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one sample per case instead of five")
    args = ap.parse_args(argv)
    samples = 1 if args.quick else 5

    measure("default", True)  # warm-up: file system caches, .pyc files
    cases = [(e, c) for e in ("default", "large") for c in (True, False)]
    runs: dict = {case: [] for case in cases}
    for _ in range(samples):  # round-robin, so background load spreads over every case
        for case in cases:
            runs[case].append(measure(*case))
    rows = {case: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for case, rs in runs.items()}

    print(f"synth benchmark ({samples} sample{'s' if samples > 1 else ''} per case, median, seconds)")
    print(f"{'example':8} {'cdk-nag':8} {'resources':>9} {'import':>7} {'build':>7} {'synth':>7} {'total':>7}")
    for (example, checks), r in rows.items():
        total = r["import"] + r["build"] + r["synth"]
        print(f"{example:8} {'on' if checks else 'off':8} {int(r['resources']):9d} {r['import']:7.2f} "
              f"{r['build']:7.2f} {r['synth']:7.2f} {total:7.2f}")
    d, lg = rows[("default", True)], rows[("large", True)]
    tot = lambda r: r["import"] + r["build"] + r["synth"]  # noqa: E731
    print(f"large/default total (cdk-nag on): {tot(lg) / tot(d):.2f}x for "
          f"{lg['resources'] / d['resources']:.2f}x the resources")
    nag_on, nag_off = rows[("default", True)], rows[("default", False)]
    print(f"cdk-nag gate cost on default synth: {nag_on['synth'] / nag_off['synth']:.2f}x "
          f"({nag_on['synth'] - nag_off['synth']:+.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
