"""Score the kernel-log rules on real lines people posted (real_lines.csv), per half of the split.

Each line goes through a fresh ``KernelLogEngine`` (the live agent's and ``diagnose``'s engine): the labels are
per line. Scores per half: false alarms (lines whose only acceptable action is ``none`` that the rules act on),
actionable recall (of lines that need node action, those given an acceptable action) and lenient accuracy (lines
given an action in their acceptable set). ``python -m tests.node_agent.corpus.score [--half tune|test]``.
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass, field
from pathlib import Path

from node_agent.kernel_engine import KernelLogEngine

CORPUS = Path(__file__).with_name("real_lines.csv")


@dataclass
class Score:
    lines: int = 0
    false_alarms: int = 0
    actionable: int = 0
    caught: int = 0
    acceptable: int = 0
    misses: list[tuple[str, str, str]] = field(default_factory=list)
    alarms: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.caught / self.actionable if self.actionable else 1.0

    @property
    def accuracy(self) -> float:
        return self.acceptable / self.lines if self.lines else 1.0


def rows(half: str | None = None) -> list[dict]:
    with CORPUS.open(newline="") as f:
        return [r for r in csv.DictReader(f) if half is None or r["split"] == half]


def score(half: str) -> Score:
    s = Score()
    for r in rows(half):
        ok = set(r["acceptable"].split("|"))
        f = KernelLogEngine().feed(r["line"])
        action = f.action.value if f else "none"
        s.lines += 1
        s.acceptable += action in ok
        if ok == {"none"} and action != "none":
            s.false_alarms += 1
            s.alarms.append((r["line"], action, f.rule if f else ""))
        if "none" not in ok:
            s.actionable += 1
            s.caught += action in ok
            if action not in ok:
                s.misses.append((r["line"], action, r["acceptable"]))
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", choices=["tune", "test"], action="append")
    ap.add_argument("-v", action="store_true", help="list misses and false alarms")
    args = ap.parse_args()
    print("| half | sources | lines | false alarms | actionable recall | lenient accuracy |")
    print("|---|---|---|---|---|---|")
    for half in args.half or ["tune", "test"]:
        s = score(half)
        n = len({r["source"] for r in rows(half)})
        print(f"| {half} | {n} | {s.lines} | {s.false_alarms} | {s.caught}/{s.actionable} = {s.recall:.2f} "
              f"| {s.acceptable}/{s.lines} = {s.accuracy:.2f} |")
        if args.v:
            for line, action, ok in s.misses:
                print(f"  miss [{action} not in {ok}] {line}")
            for line, action, rule in s.alarms:
                print(f"  ALARM [{action} {rule}] {line}")


if __name__ == "__main__":
    main()
