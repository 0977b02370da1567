"""List candidate fault printers in a source checkout, to review against node_agent/catalog/printers.csv.

    python tools/printer_candidates.py GIT_DIR TAG PATH... [--grep REGEX] [--csv OUT]

Reads each file at TAG (``git show``; a bare mirror is enough), finds error-level printer calls (NVIDIA's NV_PRINTF
LEVEL_ERROR, NV_DEV_PRINTF / nv_printf NV_DBG_ERRORS, NV_ASSERT_FAILED, portDbgPrintf; Linux pr_err / pr_crit /
pr_alert / pr_emerg / dev_err / dev_crit / printk KERN_ERR and above), joins the string literals of the call into
its format, keeps those whose format matches ``--grep`` (default: failure words), and prints one CSV row each:
path, line, call, format, catalog row ids whose format contains it. The summary line gives candidates / in the
catalog. A new driver branch or kernel is then a diff of this list, not a hunt for log lines.
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node_agent.printers import PRINTERS  # noqa: E402

CALL = re.compile(r"\b(NV_PRINTF|NV_DEV_PRINTF|nv_printf|NV_ASSERT_FAILED|portDbgPrintf|pr_err|pr_crit|pr_alert"
                  r"|pr_emerg|pr_err_ratelimited|dev_err|dev_crit|dev_alert|dev_emerg|printk)\s*\(")
LEVEL = re.compile(r"LEVEL_ERROR|NV_DBG_ERRORS|KERN_(?:ERR|CRIT|ALERT|EMERG)|HW_ERR")
NEEDS_LEVEL = {"NV_PRINTF", "NV_DEV_PRINTF", "nv_printf", "printk"}
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
DEFAULT_GREP = r"(?i)fail|cannot|timed? ?out|timeout|error|lost|fallen off|reset required|corrupt|poison|not recovered"


def _core(fmt: str) -> str:
    """The longest constant part of a format (what identifies its printer across branches)."""
    return max(re.split(r"%[-#0-9.]*[a-zA-Z]+|NVRM: ", fmt), key=len).strip(" :") or fmt


def _statement(lines: list[str], i: int) -> str:
    text = ""
    for line in lines[i:i + 12]:
        text += line.strip() + " "
        if ";" in line:
            break
    return text


def candidates(git_dir: str, tag: str, paths: list[str], grep: str) -> list[dict]:
    keep, out = re.compile(grep), []
    for path in paths:
        src = subprocess.run(["git", "-C", git_dir, "show", f"{tag}:{path}"], capture_output=True, text=True,
                             check=True).stdout.splitlines()
        for i, line in enumerate(src):
            m = CALL.search(line)
            if not m:
                continue
            stmt = _statement(src, i)
            if m.group(1) in NEEDS_LEVEL and not LEVEL.search(stmt):
                continue
            fmt = "".join(LITERAL.findall(stmt[stmt.find("(") + 1:])).replace("\\n", "").strip()
            if not fmt or not keep.search(fmt):
                continue
            longest = _core(fmt)
            rows = [p.id for p in PRINTERS if longest in p.format or _core(p.format) in fmt]
            out.append({"path": path, "line": i + 1, "call": m.group(1), "format": fmt,
                        "catalog": " ".join(rows)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir")
    ap.add_argument("tag")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--grep", default=DEFAULT_GREP)
    ap.add_argument("--csv", help="write the rows here (default: stdout)")
    a = ap.parse_args(argv)
    try:
        rows = candidates(a.git_dir, a.tag, a.paths, a.grep)
    except subprocess.CalledProcessError as e:
        print(f"error: git show failed for {a.tag}: {e.stderr.strip()[:200]}", file=sys.stderr)
        return 2
    f = open(a.csv, "w", newline="") if a.csv else sys.stdout  # noqa: SIM115
    w = csv.DictWriter(f, fieldnames=["path", "line", "call", "format", "catalog"], lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    if a.csv:
        f.close()
    print(f"{len(rows)} candidate printers, {sum(1 for r in rows if r['catalog'])} in the catalog", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
