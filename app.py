#!/usr/bin/env python3
"""CDK entry point: ``cdk synth -c spec=clusters/prod.yaml``.

Without ``-c spec=...`` it uses ./openpod.yaml and says so, or stops: it never deploys the bundled example
by default (``make synth`` passes ``SPEC=examples/default.yaml`` explicitly).

A bad spec prints one ``error: <file>: <field>: <message>`` line per problem
and exits 2. A cdk-nag finding that is not acknowledged fails the synth.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from infra.spec.base import SpecError  # noqa: E402
from infra.spec.loading import load_spec  # noqa: E402


def main() -> int:
    from infra.app.stacks import build_app, new_app

    app = new_app()
    spec_path = app.node.try_get_context("spec")
    if not spec_path:
        if not Path("openpod.yaml").is_file():
            print("error: no spec: pass -c spec=PATH (e.g. -c spec=examples/default.yaml) or put the spec at "
                  "./openpod.yaml", file=sys.stderr)
            return 2
        spec_path = "openpod.yaml"
        print("using spec openpod.yaml (found in the current directory; -c spec=PATH to use another)",
              file=sys.stderr)
    try:
        spec = load_spec(spec_path)
    except SpecError as e:
        for p in e.problems:
            print(f"error: {e.source}: {p}", file=sys.stderr)
        return 2
    from infra.spec.warnings import warnings_for

    for w in warnings_for(spec):
        print(f"warning: {spec_path}: {w}", file=sys.stderr)

    try:
        build_app(spec, app=app)
        app.synth()
    except Exception as e:  # jsii surfaces construct and validation errors as generic errors
        lines = [ln for ln in str(e).splitlines() if ln.strip()] or [type(e).__name__]
        print(f"error: synth failed: {lines[0]}", file=sys.stderr)
        for line in lines[1:]:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
