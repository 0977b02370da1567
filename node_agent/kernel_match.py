"""Matching kernel-log lines against the rule table (node_agent/rules.py): anchored at the printer's prefix.

A line is split by ``logformat.parse``; records user space wrote and records whose text a user process shapes
never match. Xid and SXid lines are dispatched by code; x86 machine-check bank lines are decided by their
IA32_MCi_STATUS word (``mce_status_rule``); CPER records are classed by section type (``cper_section_rule``,
called by node_agent.kernel_engine, which keeps each record across its lines); every other kernel-log rule is
tried top to bottom with ``re.match``, first match wins.
"""

from __future__ import annotations

import re

from node_agent import logformat
from node_agent.findings import Finding
from node_agent.rules import KERNEL_RULES, RULES, XID_FORMAT as _XID, Rule

# Catalog Xid rows are dispatched by code (one regex, one dict lookup) instead of tried one by one.
_XID_BY_CODE: dict[str, Rule] = {
    r.id[4:]: r for r in KERNEL_RULES if r.id.startswith("xid-") and r.id[4:].isdigit() and r.id != "xid-154"}
_XID_ANY = re.compile(_XID.format(code=r"(?P<code>\d+)"))
_SXID_BY_CODE: dict[str, Rule] = {r.id[5:]: r for r in KERNEL_RULES if r.id.startswith("sxid-") and r.id[5:].isdigit()}
_SXID_ANY = re.compile(r"nvidia-nvswitch\d+: SXid \(PCI:(?P<device>[0-9A-Fa-f:.]+)\): (?P<code>\d+), "
                       r"(?!Severity|Non-fatal)")
_NVLINK5_NONFATAL = (RULES["xid-nvlink5-nonfatal"], re.compile(RULES["xid-nvlink5-nonfatal"].match))
_BY_CODE = set(_XID_BY_CODE.values()) | set(_SXID_BY_CODE.values()) | {_NVLINK5_NONFATAL[0]}
# Kernel-log rows decided by code, not by their own regex (their match column says the condition in words).
_DECODED = {"mce-uncorrected-fatal", "mce-uncorrected", "mce-corrected", "cper-memory-uncorrected",
            "cper-processor-uncorrected", "cper-pcie-uncorrected"}
_COMPILED: tuple[tuple[Rule, re.Pattern], ...] = tuple(
    (r, re.compile(r.match)) for r in KERNEL_RULES if r not in _BY_CODE and r.id not in _DECODED)
# Cheap substring gate: a line that contains none of these cannot match any kernel rule.
_GATE = re.compile(r"NVRM: Xid|SXid|NEURON_HW_ERR|efa |ena |EXT4-fs|XFS \(|soft lockup|blocked for more than"
                   r"|Out of memory|EDAC MC|Hardware Error|QID|controller is down|probe failure|fallen off the bus"
                   r"|AER|PCIe Bus Error|zpci|LOCKUP|Kernel panic|Oops|BUG|I/O error|error, dev |memory error|\[#\d"
                   r"|Internal error: |NX-protected|detected stall|Memory failure|MCE 0x|RmInit|GSP|kgspBootGspRm"
                   r"|GFW|kfsp|FSP|eartbeat|RISC-V|RC watchdog|Cannot attach gpu|osInitNvMapping|NV_ERR_RESET_REQUIRED"
                   r"|Booter|lockdown|falcon reset|RPC infrastructure|SEC2-RTOS|VBIOS|Machine check|Memory error"
                   r"|NVRM|bad state|PANIC: double fault|accessed poison|MCE: Killing|after reset failure"
                   r"|IO queues|CMCI storm|records pool full|clock is throttled")


# Records whose text a user process shapes: never a fault, whatever they contain. The kernel prints the faulting
# task's name (comm, up to 15 bytes, set by the task: prctl PR_SET_NAME) and, after " in ", the file name of the
# faulting mapping (any name the task gave a file it mapped): arch/x86/mm/fault.c show_signal_msg
# "%s%s[%d]: segfault at %lx ip %px sp %px error %lx" + print_vma_addr(" in %s[%lx+%lx]"); arch/x86/kernel/traps.c
# (pr_fmt "traps: ") "%s[%d] trap %s ip:%lx sp:%lx error:%lx" and "%s[%d] general protection fault ip:..."; arm64
# arch/arm64/kernel/traps.c arm64_show_signal "%s[%d]: unhandled exception: ..."; kernel/signal.c
# "potentially unexpected fatal signal %d."; audit records (kernel/audit.c "audit: type=%d audit(...)": names,
# paths, commands chosen by the process). Rules are anchored at the printer's prefix as well, so this list is
# the second guard, not the only one.
_USER_SHAPED = re.compile(r"(?:traps: )?[^\n]{0,16}?\[\d+\]:? (?:segfault at |trap |general protection fault|unhandled "
                          r"|potentially unexpected fatal signal|bad frame |vsyscall |exception )"
                          r"|audit: |audit\(|type=\d+ audit\(|show_signal_msg: \d+ callbacks suppressed")


def user_shaped(message: str) -> bool:
    """True for a kernel record whose text a user process chooses (see _USER_SHAPED)."""
    return _USER_SHAPED.match(message) is not None


def match_kernel_line(line: str) -> Finding | None:
    """Classify one log line in any supported format (node_agent.logformat): the first matching rule wins.

    None for no match, for a record user space wrote (facility other than kernel, another program's syslog line)
    and for a record whose text a user process shapes (segfault, trap and audit reports)."""
    rec = logformat.parse(line)
    return match_message(rec.message, line) if rec.kernel else None


def match_message(message: str, evidence: str | None = None) -> Finding | None:
    """Classify one kernel message (its log prefix already taken off): rules match anchored at its start."""
    line, evidence = message, message if evidence is None else evidence
    if not _GATE.search(line) or user_shaped(line):
        return None
    if line.startswith("NVRM: Xid"):
        m = _NVLINK5_NONFATAL[1].match(line) if " Nonfatal " in line else None
        if m:
            return _NVLINK5_NONFATAL[0].finding(evidence, device=m.group("device"), code=m.group("code"))
        m = _XID_ANY.match(line)
        if m and m.group("code") in _XID_BY_CODE:  # 154 is not in it: its rules below read the driver's verdict
            return _XID_BY_CODE[m.group("code")].finding(evidence, device=m.group("device"))
    elif line.startswith("nvidia-nvswitch"):
        m = _SXID_ANY.match(line)
        if m and m.group("code") in _SXID_BY_CODE:
            return _SXID_BY_CODE[m.group("code")].finding(evidence, device=m.group("device"))
    if line.startswith("mce: [Hardware Error]: CPU"):
        m = _MCE_BANK.match(line)
        if m:
            return mce_status_rule(int(m.group("status"), 16)).finding(evidence, device=m.group("device"),
                                                                       bank=m.group("bank"))
    for rule, pattern in _COMPILED:
        m = pattern.match(line)
        if m:
            groups = {k: v for k, v in m.groupdict().items() if v}
            device = groups.pop("device", "") or groups.pop("xdev", "")
            return rule.finding(evidence, device=device, **groups)
    return None


_MCE_BANK = re.compile(r"mce: \[Hardware Error\]: CPU (?P<device>\d+): Machine Check(?: Exception)?: [0-9a-fA-F]+ "
                       r"Bank (?P<bank>\d+): (?P<status>[0-9a-fA-F]{1,16})\b")
_MCI_UC, _MCI_PCC = 1 << 61, 1 << 57


def mce_status_rule(status: int) -> Rule:
    """The rule for an x86 bank's IA32_MCi_STATUS: UC+PCC fatal, UC uncorrected, else corrected."""
    if status & _MCI_UC:
        return RULES["mce-uncorrected-fatal" if status & _MCI_PCC else "mce-uncorrected"]
    return RULES["mce-corrected"]


_CPER_PROCESSOR = ("general processor error", "ARM processor error", "IA32/X64 processor error")


def cper_section_rule(severity: str, section_type: str) -> Rule | None:
    """The rule for one section of a CPER record that was not fatal (node_agent.kernel_engine keeps the record)."""
    if severity not in ("recoverable", "fatal"):
        return None
    if section_type == "memory error":
        return RULES["cper-memory-uncorrected"]
    if section_type == "PCIe error":
        return RULES["cper-pcie-uncorrected"]
    if section_type in _CPER_PROCESSOR:
        return RULES["cper-processor-uncorrected"]
    return None
