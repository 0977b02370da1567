"""List candidate fault printers in a source checkout, to review against node_agent/catalog/printers.csv.

    python tools/printer_candidates.py GIT_DIR TAG PATH... [--grep REGEX] [--csv OUT] [--level warning]
    python tools/printer_candidates.py --dir SOURCE_DIR PATH... [--grep REGEX] [--csv OUT] [--level warning]

Reads each file at TAG (``git show``; a bare mirror is enough), or as it is under SOURCE_DIR (an unpacked tarball),
finds error-level printer calls (NVIDIA's NV_PRINTF LEVEL_ERROR and LEVEL_FATAL, NV_DEV_PRINTF / nv_printf
NV_DBG_ERRORS, NV_ASSERT_FAILED, portDbgPrintf; the NVSwitch driver's NVSWITCH_PRINT_SXID(_NO_BBX) and
nvswitch_os_print at NVSWITCH_DBG_LEVEL_ERROR - its NVSWITCH_PRINT is compiled out of release builds; UVM's
UVM_ERR_PRINT_ALWAYS(_RL) - its UVM_ERR_PRINT prints only with uvm_debug_prints=1; Linux
pr_/dev_/pci_/netdev_/netif_/ibdev_ err / crit / alert / emerg (plain, _ratelimited, _once), xfs_alert / xfs_crit /
xfs_emerg / xfs_err, printk and ext4_msg at KERN_ERR and above or at a caller's ``pfx`` / ``newpfx`` (cper.c: GHES
passes the record's level in it), panic and mce_panic; with ``--level warning`` the warning-level ones instead:
NV_PRINTF LEVEL_WARNING, pr_/dev_/pci_/netdev_/netif_/ibdev_warn, xfs_warn, ext4_warning, printk / ext4_msg at
KERN_WARNING, WARN() / WARN_ONCE() / WARN_RATELIMIT()'s format), joins the string literals of the call into its
format, keeps those whose format matches ``--grep`` (default: failure words), and prints one CSV row each: path, line,
call, format, catalog row ids whose format contains it, and the engine's verdict. A candidate a row holds is rendered
from its own format (``printers.record``: the row's prefix before it, the row's record lines and ``bind`` where the
conversions line up, random variable parts) and fed through the live engine (node_agent.kernel_engine) as a /dev/kmsg
record and as a dmesg line, four seeds each: "ok" when a holding row's rule classifies it (for a "-" row: no acting
rule), else "<row>=<rule the engine gave, or none>". The summary line gives candidates / held by a catalog row /
classified by the engine as the row says. A new driver branch or kernel is then a diff of this list, not a hunt for
log lines.
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node_agent.findings import Action  # noqa: E402
from node_agent.kernel_engine import KernelLogEngine  # noqa: E402
from node_agent.printers import PRINTERS, Printer, conversions, generalises, record  # noqa: E402

CALL = re.compile(r"(?<![\w.>])(NV_PRINTF|NV_DEV_PRINTF|nv_printf|NV_ASSERT_FAILED|portDbgPrintf"
                  r"|NVSWITCH_PRINT_SXID(?:_NO_BBX)?|nvswitch_os_print|UVM_ERR_PRINT_ALWAYS(?:_RL)?"
                  r"|(?:pr|dev|pci|netdev|netif|ibdev)_(?:err|crit|alert|emerg)(?:_ratelimited|_once)?"
                  r"|xfs_(?:alert|crit|emerg|err)(?:_tag)?|ext4_msg|printk|panic|mce_panic)\s*\(")
LEVEL = re.compile(r"LEVEL_(?:ERROR|FATAL)|NV_DBG_ERRORS|NVSWITCH_DBG_LEVEL_ERROR|KERN_(?:ERR|CRIT|ALERT|EMERG)|HW_ERR"
                   r"|\b(?:new)?pfx\b")
# --level warning: the warning-level printers (pr_/dev_/pci_/netdev_/netif_/ibdev_warn, xfs_warn, ext4_warning,
# printk / ext4_msg at KERN_WARNING, NV_PRINTF LEVEL_WARNING, WARN() / WARN_ONCE() / WARN_RATELIMIT()'s format)
WARN_CALL = re.compile(r"(?<![\w.>])(NV_PRINTF|NV_DEV_PRINTF|nv_printf|nvswitch_os_print"
                       r"|(?:pr|dev|pci|netdev|netif|ibdev)_warn(?:ing)?(?:_ratelimited|_once)?"
                       r"|xfs_warn(?:_ratelimited|_once)?|ext4_warning(?:_inode)?|ext4_msg"
                       r"|printk(?:_ratelimited|_once)?"
                       r"|WARN(?:_ONCE|_RATELIMIT)?)\s*\(")
WARN_LEVEL = re.compile(r"LEVEL_WARNING|NV_DBG_WARNINGS|NVSWITCH_DBG_LEVEL_WARN|KERN_WARNING")
NEEDS_LEVEL = {"NV_PRINTF", "NV_DEV_PRINTF", "nv_printf", "nvswitch_os_print", "printk", "printk_ratelimited",
               "printk_once", "ext4_msg"}
LEVELS = {"error": (CALL, LEVEL), "warning": (WARN_CALL, WARN_LEVEL)}
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
# a printf conversion (the kernel's %p extensions take one letter: %pS, %pV, %pe), so "%serror_type" keeps its text
CONVERSION = re.compile(r"%[-#0 +]*[0-9.*]*(?:hh|h|ll|l|L|z|j|t)?(?:p[a-zA-Z]?|[diouxXcsn%])|NVRM: ")
MIN_CORE = 8
LINUX = "gregkh/linux@"  # a shorter constant part ("%s: %s", "error") names no printer
DEFAULT_GREP = (r"(?i)fail|cannot|timed? ?out|timeout|error|lost|fallen off|reset required|corrupt|poison"
                r"|not recovered|lockup|stall|blocked for more|fatal|uncorrect|machine check|\bBUG\b|oops|abort"
                r"|can ?not|didn't|did not|not ready|unrecoverable|severity"
                r"|shut(?:ting)? ?down|read-only")


def _core(fmt: str) -> str:
    """The longest constant part of a format (what identifies its printer across branches)."""
    return max(CONVERSION.split(fmt), key=len).strip(" :") or fmt


def _as_row(fmt: str, p: Printer) -> Printer:
    """The row ``p`` with ``fmt`` as its format as the log shows it: the row's prefix (pr_fmt, dev_printk's device,
    NVRM's function) before the text both share, the row's bound parts when the conversions line up; the row's
    own format when the row prints one case of ``fmt`` (a %s the row names)."""
    fmt = re.sub(r"\\(.)", r"\1", fmt)
    core = _core(fmt)
    if core not in p.format:
        core = _core(p.format)
    r, c = p.format.find(core), fmt.find(core)
    prefix = ""
    if r < 0 or c < 0:
        line = fmt
    elif r >= c and p.format[r - c:r] == fmt[:c]:  # the row's text before the shared part is the candidate's
        prefix = p.format[:r - c]
        line = prefix + fmt
    else:  # a conversion of the row stands for text of the candidate: the row's prefix up to its last ": "
        prefix = p.format[:p.format.rfind(": ", 0, r) + 2] if ": " in p.format[:r] else ""
        line = prefix + fmt.lstrip() if prefix else fmt
    if generalises(line, p.format):
        return p
    if conversions(line) == conversions(p.format):
        return replace(p, format=line)
    # the bound parts of the row's prefix (an SXid line's switch name) still stand; the rest do not line up
    return replace(p, format=line, bind={i: v for i, v in p.bind.items() if i < conversions(prefix)})


def verdict(lines: list[str], rows: list[Printer], seeds: int = 4) -> str:
    """"ok" when the engine classifies the candidate (its format's ``lines``: one kernel record each) as one of
    the rows holding it says, else what it gave per row. The record's line a row holds is the one judged; a
    one-line printer is fed after the row's context lines (a CPER record's earlier lines)."""
    got = []
    for p in rows:
        i = next((i for i, x in enumerate(lines) if _core(x) in p.format or _core(p.format) in x), len(lines) - 1)
        q = _as_row(lines[i], p)
        if len(lines) > 1:
            q = replace(q, context=tuple(re.sub(r"\\(.)", r"\1", x) for x in lines[:i]))
        seen = set()
        for seed in range(seeds):
            text = record(q, random.Random(f"{p.id}/{seed}"))
            for live in (True, False):
                engine, f = KernelLogEngine(), None
                for k, x in enumerate(text):
                    f = engine.feed(x, 1000.0 + k) if live else engine.feed(f"[ 1234.{k:06d}] {x}")
                seen.add("-" if f is None or (p.rule == "-" and f.action is Action.NONE) else f.rule)
        if seen == {p.rule}:
            return "ok"
        got.append(f"{p.id}={'|'.join(sorted(x if x != '-' else 'none' for x in seen))}")
    return " ".join(got)


def _statement(lines: list[str], i: int) -> str:
    text = ""
    for line in lines[i:i + 12]:
        text += line.strip() + " "
        if ";" in line:
            break
    return text


def _read(root: str, tag: str | None, path: str) -> list[str]:
    """The file at ``tag`` of the git repository ``root``, or (``tag`` None) under the directory ``root``."""
    if tag is None:
        return (Path(root) / path).read_text(errors="replace").splitlines()
    return subprocess.run(["git", "-C", root, "show", f"{tag}:{path}"], capture_output=True, text=True,
                          check=True).stdout.splitlines()


def candidates(root: str, tag: str | None, paths: list[str], grep: str, level: str = "error") -> list[dict]:
    keep, out = re.compile(grep), []
    call, needed = LEVELS[level]
    for path in paths:
        src = _read(root, tag, path)
        for i, line in enumerate(src):
            m = call.search(line)
            if not m or line.lstrip().startswith(("#define", "*", "/*", "//")):
                continue
            stmt = _statement(src, i)
            if m.group(1) in NEEDS_LEVEL and not needed.search(stmt):
                continue
            text = "".join(LITERAL.findall(stmt[stmt.find("(") + 1:]))
            fmt, lines = text.replace("\\n", "").strip(), [x.strip() for x in text.split("\\n") if x.strip()]
            if not fmt or not keep.search(fmt):
                continue
            longest = _core(fmt)
            # a Linux row names its file: ena_com.c and efa_com.c share texts, so do x86 and arm64 traps.c
            rows = [p.id for p in PRINTERS if (path + ":" in p.source or not p.source.startswith(LINUX))
                    and (len(longest) >= MIN_CORE and longest in p.format
                         or len(_core(p.format)) >= MIN_CORE and _core(p.format) in fmt)]
            held = [p for p in PRINTERS if p.id in rows]
            out.append({"path": path, "line": i + 1, "call": m.group(1), "format": fmt,
                        "catalog": " ".join(rows), "engine": verdict(lines, held) if held else ""})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("args", nargs="+", metavar="GIT_DIR TAG PATH...")
    ap.add_argument("--dir", help="read PATH... under this directory (an unpacked source tree) instead of a tag")
    ap.add_argument("--grep", default=DEFAULT_GREP)
    ap.add_argument("--csv", help="write the rows here (default: stdout)")
    ap.add_argument("--level", choices=sorted(LEVELS), default="error",
                    help="the printers listed: error level and above (default) or warning level")
    a = ap.parse_args(argv)
    if a.dir is None and len(a.args) < 3:
        ap.error("GIT_DIR TAG PATH...: give a repository, a tag and at least one path (or --dir DIR PATH...)")
    root, tag, paths = (a.dir, None, a.args) if a.dir is not None else (a.args[0], a.args[1], a.args[2:])
    try:
        rows = candidates(root, tag, paths, a.grep, a.level)
    except subprocess.CalledProcessError as e:
        print(f"error: git show failed for {tag}: {e.stderr.strip()[:200]}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: --dir {root}: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    f = open(a.csv, "w", newline="") if a.csv else sys.stdout  # noqa: SIM115
    w = csv.DictWriter(f, fieldnames=["path", "line", "call", "format", "catalog", "engine"], lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    if a.csv:
        f.close()
    print(f"{len(rows)} candidate printers, {sum(1 for r in rows if r['catalog'])} held by a catalog row, "
          f"{sum(1 for r in rows if r['engine'] == 'ok')} classified by the engine as the row says", file=sys.stderr)
    for r in rows:
        if r["catalog"] and r["engine"] != "ok":
            print(f"misclassified: {r['path']}:{r['line']} {r['format']!r}: {r['engine']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
