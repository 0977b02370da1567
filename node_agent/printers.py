"""The catalog of fault printers (node_agent/catalog/printers.csv): what the kernel and drivers print, as data.

One row per printer, read from its source at a named tag: the format string as it reaches the log (the
printer's own prefix included: pr_fmt, dev_printk's "<driver> <device>: ", NV_PRINTF's "NVRM: <function>: ",
NV_DEV_PRINTF's "NVRM: GPU <pci>: "), where it is (repo@tag:path:line: NVIDIA at its driver tags, Linux at the
linux-stable tags v6.12.107 and v6.1.172), the fault class, the action and why, whether a user process can
shape its text, and the rule that must classify it ("-": no rule may act on it). ``bind`` fixes the variable
parts that decide the class ("index=value;..."), ``context`` lists the record lines printed before it (CPER
records span lines).
``tests/node_agent/test_printers.py`` renders every row with random variable parts in every log format the
agent reads and checks that its rule, and only it, matches. ``tools/printer_candidates.py`` lists candidate
printers from a checkout, so a new driver branch is a diff to review, and renders each one a row holds from its own
format (``record``) through the engine.
"""

from __future__ import annotations

import csv
import random
import re
from dataclasses import dataclass
from pathlib import Path

CATALOG_FILE = Path(__file__).with_name("catalog") / "printers.csv"


@dataclass(frozen=True)
class Printer:
    id: str
    subsystem: str
    format: str
    source: str
    fault_class: str
    action: str
    why: str
    user_text: str
    rule: str          # the rule that classifies it; "-": none may act
    bind: dict[int, str]
    context: tuple[str, ...]


def _bind(text: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for part in filter(None, text.split(";")):
        k, _, v = part.partition("=")
        out[int(k)] = v
    return out


def load(path: Path = CATALOG_FILE) -> tuple[Printer, ...]:
    with path.open(newline="") as f:
        return tuple(Printer(r["id"], r["subsystem"], r["format"], r["source"], r["fault_class"], r["action"],
                             r["why"], r["user_text"], r["rule"], _bind(r["bind"]),
                             tuple(filter(None, r["context"].split("|"))))
                     for r in csv.DictReader(f))


PRINTERS: tuple[Printer, ...] = load()

# printf conversions as the kernel's vsnprintf and NVIDIA's nv_printf take them (flags, width, length, %p extensions).
_CONV = re.compile(r"%(?P<flags>[-#0 +]*)(?P<width>\d+)?(?:\.\d+)?(?:hh|h|ll|l|L|z)?(?P<conv>[diuxXscp%])"
                   r"(?P<ext>(?<=p)[a-zA-Z]+)?")


def _value(m: re.Match, rng: random.Random) -> str:
    conv, width = m.group("conv"), int(m.group("width") or 0)
    if conv == "%":
        return "%"
    if conv in "diu":
        return str(rng.randrange(0, 100000))
    if conv in "xX" or conv == "p":
        digits = width or rng.randrange(1, 13)
        v = "".join(rng.choice("0123456789abcdef") for _ in range(digits if conv != "p" else 16))
        return ("0x" if "#" in m.group("flags") else "") + (v.upper() if conv == "X" else v)
    if conv == "c":
        return rng.choice("abcxyz")
    return rng.choice("abcdefghijklmnopqrstuvwxyz_") + "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
        for _ in range(rng.randrange(2, 12)))


_BDF = "%04x:%02x:%02x.%x"


def render(fmt: str, rng: random.Random, bind: dict[int, str] | None = None) -> str:
    """``fmt`` with each conversion replaced: a bound value, else a random one of the conversion's kind."""
    bind, n = bind or {}, iter(range(1 << 30))

    def sub(m: re.Match) -> str:
        if m.group("conv") == "%":
            return "%"
        i = next(n)
        if i in bind:
            return bind[i]
        if m.string.endswith(_BDF[:-2], 0, m.start()):  # a PCI function: one hex digit, 0-7
            return str(rng.randrange(8))
        return _value(m, rng)
    return _CONV.sub(sub, fmt)


def conversions(fmt: str) -> int:
    """How many variable parts ``fmt`` has (``bind``'s indexes count them)."""
    return sum(m.group("conv") != "%" for m in _CONV.finditer(fmt))


def generalises(fmt: str, row_format: str) -> bool:
    """True when ``row_format`` is one case of ``fmt``: its text with some conversions filled (cper.c's
    "[Hardware Error]: %serror_type: %d, %s" and the row "[Hardware Error]:   error_type: %d, multi-bit ECC")."""
    parts, at = [], 0
    for m in _CONV.finditer(fmt):
        parts += [re.escape(fmt[at:m.start()]), "%" if m.group("conv") == "%" else "(.*?)"]
        at = m.end()
    m = re.fullmatch("".join(parts) + re.escape(fmt[at:]), row_format, re.S)
    return m is not None


def record(p: Printer, rng: random.Random) -> list[str]:
    """The record's rendered lines: ``p``'s context lines (CPER records span lines), then its format with its
    ``bind``. GHES's per-record "{%u}" is one number for the whole record."""
    seq = "{" + str(rng.randrange(1, 64)) + "}"
    return [*(render(x.replace("{%u}", seq), rng) for x in p.context), render(p.format.replace("{%u}", seq), rng,
                                                                              p.bind)]


def rows_of(rule_id: str) -> tuple[str, ...]:
    """The catalog rows a rule classifies."""
    return tuple(p.id for p in PRINTERS if p.rule == rule_id)


def coverage() -> list[tuple[str, int, int, int]]:
    """(subsystem, printers in the catalog, of them fault printers (action other than none), fault printers a
    rule classifies) per subsystem."""
    out: dict[str, list[int]] = {}
    for p in PRINTERS:
        row = out.setdefault(p.subsystem, [0, 0, 0])
        row[0] += 1
        if not p.action.startswith("none"):
            row[1] += 1
            row[2] += p.rule != "-"
    return [(s, *v) for s, v in out.items()]


def coverage_markdown() -> str:
    """The per-subsystem coverage table of docs/node-agent.md (tests check the page holds it verbatim)."""
    out = ["| subsystem | printers in the catalog | fault printers (action) | classified by a rule |",
           "|---|---|---|---|"]
    rows = coverage()
    for s, n, faults, covered in rows:
        out.append(f"| {s} | {n} | {faults} | {covered} |")
    out.append(f"| **all** | {sum(r[1] for r in rows)} | {sum(r[2] for r in rows)} | {sum(r[3] for r in rows)} |")
    return "\n".join(out) + "\n"
