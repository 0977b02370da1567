"""THE rule table: every fault the agent knows, what it means and what the node needs.

One row per rule: match -> fault -> severity -> action (none / reboot / replace)
-> source (where the classification comes from). Detection code only matches;
the verdict always comes from this table, and ``python -m infra docs`` renders
it into ``docs/node-agent-rules.md`` so operators can audit it.

Kernel-log rows carry a regular expression matched at the start of the kernel
message, after the log format's prefix (node_agent/kernel_match.py,
node_agent/logformat.py); a few are decided by code and say so. Probe rows (NVML, Neuron tools, EFA
sysfs, host checks, deep health checks) are matched by the probe that names
them; their ``match`` column says the condition in words.

Xid actions follow the resolution buckets of NVIDIA's Xid catalog for Ampere
and newer GPUs: RESTART_APP -> no node action (the application is at fault or
merely affected), RESET_GPU / RESTART_BM -> reboot (a node reboot resets every
GPU; EKS cannot reset one GPU under a running kubelet safely), a row-remap
failure -> replace (the memory cannot be repaired in place). A node rebooted
for the same fault within the escalation window is replaced instead (see the
remediation controller), which is how persistent NVLink or fallen-off-the-bus
faults end in replacement.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from node_agent import printers
from node_agent.findings import Action, Rule, Severity
from node_agent.rules_nvidia import NVIDIA_DRIVER_RULES

A, S = Action, Severity

XID_CATALOG = "NVIDIA Xid catalog (Ampere+)"
SXID_CATALOG = "NVIDIA Fabric Manager SXid errors"
NEURON_DRIVER = "AWS Neuron driver NEURON_HW_ERR (neuron problem detector)"
NEURON_PRINTK = ("aws-neuron/aws-neuron-driver@fca19f7:neuron_cdev.c:2003-2022 ncdev_printk (printk(KERN_ERR "
                 "\"%s\") of a user buffer), reached from ncdev_misc_ioctl (2608-2609) on a device opened write-only "
                 "(50, 2647)")
EFA_DRIVER = "Linux efa driver (efa_com.c admin queue)"
KERNEL = "Linux kernel"
TABLE = "openpod instance type table"
NVML = "NVML (nvidia-ml-py) / nvidia-smi -q"
NVML_LOST = ("NVML API reference, nvmlDeviceGetHandleByIndex_v2: NVML_ERROR_GPU_IS_LOST 'if the target GPU has fallen "
             "off the bus or is otherwise inaccessible' (https://docs.nvidia.com/deploy/nvml-api/, checked 2026-11-23)")
FABRIC = ("NVML nvmlGpuFabricInfo_t / nvidia-smi -q Fabric State+Status; Not Started -> In Progress -> Completed, "
          "stuck when Fabric Manager is down (NVIDIA/NVSentinel#883, #889; checked 2026-11-23)")
DEEP = "openpod deep health check"
NEURON_SYSFS = ("AWS Neuron sysfs user guide, stats/hardware counters (aws-neuron/aws-neuron-sdk@v2.32.0:"
                "tools/neuron-sys-tools/neuron-sysfs-user-guide.rst:185-191), one file each in the driver "
                "(aws-neuron/aws-neuron-driver@fca19f7:neuron_sysfs_metrics.c:146-150,927-955), checked 2026-11-23")


# Xid rows come from the shipped catalog node_agent/catalog/xids.csv: one row per Xid of NVIDIA's catalog
# (code, mnemonic, NVIDIA's resolution, openpod's action, source, date checked). Resolution -> action:
# RESTART_APP / IGNORE / CHECK_* / UPDATE_SWFW -> none; RESET_GPU / RESTART_BM / RESTART_VM / the XID_48 and
# NVLink workflows / UNEXPECTED_ERR_REPORT_ISSUE -> reboot; a retirement (row-remap) failure -> replace.
# The driver's formats (NVIDIA/open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/kernel_rc.c): "NVRM: Xid
# (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s", with " GPU-I:%02u" [" GPU-CI:%02u"] inside the parenthesis on MIG.
XID_FORMAT = _XID = "NVRM: Xid \\((?:PCI:)?(?P<device>[0-9A-Fa-f:.]+)(?: GPU-I:\\d+)?(?: GPU-CI:\\d+)?\\): {code},"
XID_CATALOG_FILE = Path(__file__).with_name("catalog") / "xids.csv"


@dataclass(frozen=True)
class XidEntry:
    code: int
    mnemonic: str
    resolution: str
    fatal: str
    action: Action
    severity: Severity
    fault: str
    note: str
    source: str
    checked: str


def _load_xids(path: Path = XID_CATALOG_FILE) -> dict[int, XidEntry]:
    out: dict[int, XidEntry] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            code = int(row["code"])
            out[code] = XidEntry(code, row["mnemonic"], row["resolution"], row["fatal"], Action(row["action"]),
                                 Severity(row["severity"]), row["fault"], row["note"], row["source"], row["checked"])
    return out


XID_ENTRIES: dict[int, XidEntry] = _load_xids()
XIDS: dict[int, tuple[str, Severity, Action, str]] = {
    c: (e.fault, e.severity, e.action, f"{e.resolution}: {e.note}") for c, e in XID_ENTRIES.items()}

# NVSwitch SXids: node_agent/catalog/sxids.csv, one row per code of NVSentinel's sxiderrorsmapping.csv.
# IGNORE / CHECK_FM_CONFIG -> none; RESET_FABRIC / RESET_GPU / the NVLink workflow / *REPORT_ISSUE -> reboot;
# INVESTIGATE_LINK_SI / RUN_FIELDDIAG / CHECK_LINK_MECHANICAL_CONNECTIONS / CHECK_THERMALS -> replace (hardware
# service that only the cloud provider can do; a reboot does not repair a link or a cooler).
SXID_CATALOG_FILE = Path(__file__).with_name("catalog") / "sxids.csv"


def _load_sxids(path: Path = SXID_CATALOG_FILE) -> dict[int, XidEntry]:
    out: dict[int, XidEntry] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            code = int(row["code"])
            out[code] = XidEntry(code, row["mnemonic"], row["resolution"], row["fatal"], Action(row["action"]),
                                 Severity(row["severity"]), f"nvswitch-sxid-{code}", row["note"], row["source"],
                                 row["checked"])
    return out


SXID_ENTRIES: dict[int, XidEntry] = _load_sxids()

_RULES: list[Rule] = []


def _add(*rules: Rule) -> None:
    _RULES.extend(rules)


# ---------------------------------------------------------------- kernel log: NVIDIA
# Xid 154 carries the driver's own verdict ("GPU recovery action changed ... (Node Reboot Required)").
_add(
    Rule("xid-154-none", "kernel-log",
         _XID.format(code=154) + r" GPU recovery action changed from 0x[0-9a-f]+ \([^)]*\) to 0x0 \(None\)\s*$",
         "gpu-recovery-action-cleared", S.INFO, A.NONE, XID_CATALOG, "driver cleared its recovery action"),
    Rule("xid-154", "kernel-log",
         _XID.format(code=154) + r" GPU recovery action changed",
         "gpu-recovery-action-required", S.CRITICAL, A.REBOOT, XID_CATALOG,
         "driver asks for GPU reset / drain and reset / node reboot"),
)
# NVLink5 Xids (144-150, GB200/B200) carry the unit and its own Fatal/Nonfatal word after the code, e.g.
# "NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 ...)" (recorded in
# leptonai/gpud pull requests #1160 and #1174). A Nonfatal one was contained by the link: watched, no action.
_add(Rule("xid-nvlink5-nonfatal", "kernel-log", _XID.format(code="(?P<code>14[4-9]|150)") + r" \w+ Nonfatal ",
          "gpu-nvlink5-nonfatal", S.WARNING, A.NONE, XID_CATALOG + " (NVLink5 Xid, driver-printed Nonfatal)",
          "contained by the link; the Fatal form of the same Xid takes the catalog's WORKFLOW_NVLINK5_ERR -> reboot"))
for _code, _e in XID_ENTRIES.items():
    if _code != 154:  # 154 carries the driver's own verdict: the two rules above read it
        _add(Rule(f"xid-{_code}", "kernel-log", _XID.format(code=_code), _e.fault, _e.severity, _e.action,
                  f"{XID_CATALOG}: {_e.mnemonic} = {_e.resolution} ({_e.source}, checked {_e.checked})", _e.note))
_add(
    Rule("xid-unlisted", "kernel-log", _XID.format(code=r"(?P<code>\d+)"), "gpu-xid-unlisted", S.WARNING, A.NONE,
         "openpod default for codes newer than the catalog",
         "documented default: a code not in node_agent/catalog/xids.csv is recorded as an Event and a metric "
         "(no node action) until the catalog is refreshed"),
    Rule("sxid-fatal", "kernel-log",
         r"nvidia-nvswitch\d+: SXid \(PCI:(?P<device>[0-9A-Fa-f:.]+)\): (?P<code>\d+), Fatal",
         "nvswitch-fatal", S.CRITICAL, A.REBOOT, SXID_CATALOG, "fatal NVSwitch error: fabric and GPUs need a reset"),
    Rule("sxid-nonfatal", "kernel-log",
         r"nvidia-nvswitch\d+: SXid \(PCI:(?P<device>[0-9A-Fa-f:.]+)\): (?P<code>\d+), Non-fatal",
         "nvswitch-nonfatal", S.WARNING, A.NONE, SXID_CATALOG, "corrected by the fabric"),
)

# SXid lines (nvidia-nvswitch driver): "nvidia-nvswitchN: SXid (PCI:dddd:bb:dd.f): CODE, Fatal|Non-fatal, <text>",
# then "CODE, Severity N Engine instance ..." and "CODE, Data {0x..., ...}" lines for the same event. Every line
# but the Severity continuation is decoded by its code; a line on which the driver itself says "Non-fatal" is
# the sxid-nonfatal rule (the switch recovered it).
for _code, _e in SXID_ENTRIES.items():
    _add(Rule(f"sxid-{_code}", "kernel-log",
              rf"nvidia-nvswitch\d+: SXid \(PCI:(?P<device>[0-9A-Fa-f:.]+)\): {_code}, (?!Severity|Non-fatal)",
              _e.fault, _e.severity, _e.action,
              f"{SXID_CATALOG}: {_e.mnemonic} = {_e.resolution} ({_e.source}, checked {_e.checked})", _e.note))

# ---------------------------------------------------------------- kernel log: Neuron
for _kind, _fault in (("SRAM_UNCORRECTABLE_ERROR", "neuron-sram-uncorrectable"),
                      ("NC_UNCORRECTABLE_ERROR", "neuron-core-uncorrectable"),
                      ("HBM_UNCORRECTABLE_ERROR", "neuron-hbm-uncorrectable"),
                      ("DMA_ERROR", "neuron-dma-error")):
    _add(Rule(f"neuron-{_kind.lower().replace('_', '-')}", "kernel-log",
              rf"(?:\d{{4}}-\d\d-\d\dT[\d:.]+Z? )?NEURON_HW_ERR={_kind}\b(?:.*nd-id=(?P<device>\d+))?", _fault,
              S.WARNING, A.NONE, NEURON_DRIVER + "; " + NEURON_PRINTK,
              "a claim, recorded: the line says action=TERMINATE_INSTANCE, but user space writes it (the Neuron "
              "runtime, through the driver's printk ioctl, which any process with the device can call); the "
              "driver's sysfs ECC counters (neuron-*-ecc-uncorrected) and the deep check decide"))

# ---------------------------------------------------------------- kernel log: EFA
_BDF = r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]"
_add(
    Rule("efa-admin-timeout", "kernel-log",
         rf"efa (?P<device>{_BDF}).*(?:The device didn't send any completion for admin cmd"
         r"|Wait for completion \(polling\) timeout)",
         "efa-admin-queue-timeout", S.CRITICAL, A.REBOOT, EFA_DRIVER, "device stopped answering admin commands"),
    Rule("efa-missing-interrupt", "kernel-log",
         rf"efa (?P<device>{_BDF}).*driver didn't receive any MSI-X interrupt for admin cmd",
         "efa-missing-interrupt", S.CRITICAL, A.REBOOT, EFA_DRIVER),
    Rule("efa-admin-queue-closed", "kernel-log", rf"efa (?P<device>{_BDF}).*Admin queue is closed",
         "efa-admin-queue-closed", S.CRITICAL, A.REBOOT, EFA_DRIVER, "driver closed the queue after a timeout"),
    Rule("efa-reset-failed", "kernel-log",
         rf"efa (?P<device>{_BDF}).*(?:Reset indication didn't turn (?:on|off)"
         r"|Device isn't ready, (?:can't reset device|abort com init))",
         "efa-device-not-ready", S.CRITICAL, A.REBOOT, EFA_DRIVER),
    Rule("efa-command-failed", "kernel-log", rf"efa (?P<device>{_BDF}).*Failed to process command",
         "efa-command-failed", S.WARNING, A.NONE, EFA_DRIVER, "one admin command rejected (often resource limits)"),
)

# ---------------------------------------------------------------- kernel log: ENA
# drivers/net/ethernet/amazon/ena/ena_netdev.c (catalog rows ena-*; amzn/amzn-drivers' older lowercase too). A
# keep-alive timeout or lost Tx completions make the driver reset the device itself: watched, no rule.
_add(Rule("ena-reset-failed", "kernel-log",
          rf"ena (?P<device>{_BDF}).*(?i:Can not reset (?:the )?device|Can not initialize device"
          r"|device init failed|Device reset failed|Reset attempt failed)",
          "ena-device-failed", S.CRITICAL, A.REBOOT, "Linux ena driver (amzn/amzn-drivers ena_netdev.c)",
          "the node's primary network adapter could not be (re)initialised"))

# ---------------------------------------------------------------- kernel log: NVIDIA driver without an Xid
# GPU init, GSP/FSP firmware, reset-required and fallen-off-the-bus printers: node_agent/rules_nvidia.py.
_add(*NVIDIA_DRIVER_RULES)

# ---------------------------------------------------------------- kernel log: host
# PCIe AER, lockup watchdogs, panic/oops/BUG, machine checks, block layer, filesystems: catalog rows name the sources.
_AER_DEV = r"(?P<device>[0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f])"
# Severity words: "Uncorrected (Fatal)" before Linux 6.x, "Uncorrectable (Fatal)" after (drivers/pci/pcie/aer.c
# aer_error_severity_string); "... error received: <dev>" before, "... error message received from <dev>" after.
_AER_SEV = r"Uncorrect(?:ed|able) \({sev}\)"
PCI_ERR = ("Linux drivers/pci/pcie/err.c pcie_do_recovery / report_error_detected (torvalds/linux v6.12, checked "
           "2026-11-25): a driver without an error_detected callback votes PCI_ERS_RESULT_NO_AER_DRIVER, and the "
           "recovery of the whole hierarchy below the port fails")
_add(
    Rule("pcie-aer-fatal", "kernel-log",
         r"\S+ " + _AER_DEV + r": (?:AER: )?(?:PCIe Bus Error: severity=" + _AER_SEV.format(sev="Fatal") +
         r"|(?:Multiple )?" + _AER_SEV.format(sev="Fatal") + r" error (?:message )?received)",
         "pcie-uncorrectable-fatal", S.CRITICAL, A.REBOOT, KERNEL + " PCIe AER (drivers/pci/pcie/aer.c)",
         "the link is reset by the kernel; the device behind it is not trusted until a reboot"),
    Rule("pcie-aer-recovery-failed", "kernel-log",
         r"\S+ " + _AER_DEV + r": (?:AER: )?(?:[Dd]evice recovery failed|can't recover \(no error_detected callback\))"
         r"|zpci: (?P<xdev>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]): Automatic recovery failed",
         "pcie-recovery-failed", S.CRITICAL, A.REBOOT, PCI_ERR + "; s390 arch/s390/pci/pci_event.c",
         "the kernel could not recover the device (both capitalisations; a driver without AER callbacks)"),
    Rule("pcie-aer-nonfatal", "kernel-log",
         r"\S+ " + _AER_DEV + r": (?:AER: )?(?:PCIe Bus Error: severity=" + _AER_SEV.format(sev="Non-Fatal") +
         r"|(?:Multiple )?" + _AER_SEV.format(sev="Non-Fatal") + r" error (?:message )?received)",
         "pcie-uncorrectable-nonfatal", S.WARNING, A.NONE, KERNEL + " PCIe AER",
         "the driver recovers it; a failed recovery is pcie-aer-recovery-failed"),
    Rule("hard-lockup", "kernel-log",
         r"(?:(?:NMI )?watchdog: )?(?:CPU\d+: )?Watchdog detected hard LOCKUP on cpu (?P<device>\d+)",
         "cpu-hard-lockup", S.CRITICAL, A.REBOOT, KERNEL + " watchdog", "a CPU stopped taking interrupts"),
    # x86 machine checks (arch/x86/kernel/cpu/mce/core.c, pr_fmt "mce: ", HW_ERR "[Hardware Error]: "): mce_panic
    # prints HW_ERR "Machine check: %s" (mce/severity.c reasons, e.g. "Processor context corrupt"), then panics
    # ("Fatal machine check", ...); ghes.c __ghes_panic "GHES: Fatal hardware error" (v6.1, v6.12; older: "...error!")
    Rule("mce-fatal", "kernel-log",
         r"mce: \[Hardware Error\]: Machine check: |Kernel panic - not syncing: (?:Fatal (?:local )?machine check"
         r"|Machine check from unknown source|(?:GHES: )?Fatal hardware error|Timeout: Not all CPUs entered broadcast"
         r" exception|Local fatal machine check!|Failed kernel mode recovery|Too many consecutive machine checks while"
         r" accessing user data|Consecutive machine checks to different user pages|Memory failure on page [0-9a-f]+)",
         "host-hardware-fatal", S.CRITICAL, A.REPLACE, KERNEL + " (arch/x86/kernel/cpu/mce/core.c mce_panic, "
         "drivers/acpi/apei/ghes.c __ghes_panic)", "a fatal machine check or platform error: the host panicked"),
    # __print_mce: HW_ERR "CPU %d: Machine Check%s: %Lx Bank %d: %016Lx" (" Exception" when MCG_STATUS.MCIP), the
    # last number is IA32_MCi_STATUS: decoded by kernel_match.mce_status_rule (UC bit 61, PCC bit 57; Intel SDM
    # vol. 3B 16.3.2.2, arch/x86/include/asm/mce.h MCI_STATUS_UC / MCI_STATUS_PCC).
    Rule("mce-uncorrected-fatal", "kernel-log",
         "mce bank line whose MCi_STATUS has UC and PCC (processor context corrupt)", "host-hardware-fatal",
         S.CRITICAL, A.REPLACE, KERNEL + " (mce/core.c __print_mce; Intel SDM 3B MCi_STATUS.PCC)",
         "the processor context is corrupt: the kernel panics (mce/severity.c 'Processor context corrupt')"),
    Rule("mce-uncorrected", "kernel-log", "mce bank line whose MCi_STATUS has UC without PCC",
         "host-hardware-uncorrected", S.CRITICAL, A.REPLACE, KERNEL + " (mce/core.c __print_mce; Intel SDM 3B "
         "MCi_STATUS.UC)", "an uncorrected (recoverable) machine check: the hardware has a failing part"),
    Rule("mce-corrected", "kernel-log", "mce bank line whose MCi_STATUS has no UC", "host-hardware-corrected",
         S.INFO, A.NONE, KERNEL + " (mce/core.c __print_mce; Intel SDM 3B MCi_STATUS.UC)", "corrected by hardware"),
    # A corrected-error storm (catalog rows mce-cmci-storm*, mce-records-pool-full): v6.12 mce/threshold.c
    # mce_track_storm (printk_deferred, no "mce: "), v6.1 mce/intel.c cmci_storm_detect, mce/genpool.c dropping records.
    Rule("mce-corrected-storm", "kernel-log", r"(?:mce: )?(?:CPU(?P<device>\d+) BANK\d+ CMCI storm detected"
         r"|CMCI storm detected: switching to poll mode|MCE records pool full!)", "host-hardware-corrected-storm",
         S.WARNING, A.NONE, KERNEL + " (mce/threshold.c, mce/intel.c, mce/genpool.c)",
         "corrected errors so often the kernel polls the bank (or drops records): hardware degrading, nothing lost "
         "yet - the operator plans the replacement; an uncorrected error that follows is acted on"),
    Rule("cpu-thermal-throttle", "kernel-log", r"CPU(?P<device>\d+): \w+ temperature is above threshold, cpu clock "
         r"is throttled", "cpu-thermal-throttle", S.WARNING, A.NONE, KERNEL + " (drivers/thermal/intel/therm_throt.c)",
         "the CPU runs below its clock until it cools: a straggler; cooling is the platform's"),
    # GHES / BERT CPER records (drivers/firmware/efi/cper.c, ghes.c, bert.c; catalog rows cper-*): a fatal event
    # panicked the host (BERT reports it after the reboot) -> replace; a recoverable one is classed by its section
    # type in node_agent.kernel_engine: memory -> replace, processor -> reboot, PCIe -> none (AER recovery follows).
    Rule("cper-fatal", "kernel-log",
         r"(?:\{\d+\})?\[Hardware Error\]: +(?:event severity: fatal\b|Error \d+, type: fatal\b)",
         "host-hardware-fatal", S.CRITICAL, A.REPLACE, KERNEL + " (drivers/firmware/efi/cper.c, ghes.c, bert.c)",
         "a fatal platform error: the firmware could not contain it; the host panicked"),
    Rule("cper-multibit-ecc", "kernel-log",
         r"(?:\{\d+\})?\[Hardware Error\]: +error_type: \d+, multi-(?:bit|symbol ChipKill) ECC",
         "host-memory-uncorrectable", S.CRITICAL, A.REPLACE, KERNEL + " (drivers/firmware/efi/cper.c "
         "cper_mem_err_type_strs)", "a memory section's multi-bit ECC error seen without its record's severity"),
    Rule("cper-memory-uncorrected", "kernel-log", "CPER record, severity recoverable, section_type: memory error",
         "host-memory-uncorrectable", S.CRITICAL, A.REPLACE, KERNEL + " (drivers/firmware/efi/cper.c)",
         "an uncorrected DRAM error the firmware contained"),
    Rule("cper-processor-uncorrected", "kernel-log",
         "CPER record, severity recoverable, section_type: general / ARM / IA32/X64 processor error",
         "host-processor-uncorrected", S.CRITICAL, A.REBOOT, KERNEL + " (drivers/firmware/efi/cper.c)",
         "contained by the firmware; a reboot resets the CPU state, recurrence escalates to replacement"),
    Rule("cper-pcie-uncorrected", "kernel-log", "CPER record, severity recoverable, section_type: PCIe error",
         "pcie-uncorrected-contained", S.WARNING, A.NONE, KERNEL + " (drivers/firmware/efi/cper.c; ghes.c "
         "ghes_handle_aer hands it to AER recovery)", "AER recovery follows; its failure is acted on"),
    Rule("kernel-panic", "kernel-log", r"Kernel panic - not syncing: ", "kernel-panic", S.CRITICAL, A.REBOOT,
         KERNEL, "read from the log after kdump/pstore or a netconsole"),
    # Every x86 die() header is "<what>: <error code, %04lx> [#<n>]" (arch/x86/kernel/dumpstack.c __die_header:
    # "Oops: ", "general protection fault", "invalid opcode", "divide error", "stack segment", ...; since 6.10
    # prefixed "Oops: "), other architectures' "Oops: <text> [#<n>]" (powerpc "Oops: <why>, sig: <n> [#<n>]"),
    # arm and arm64 "Internal error: <what>: <code> [#<n>]" (arch/arm64/kernel/traps.c die()); more: catalog oops-*.
    Rule("kernel-oops", "kernel-log",
         r"(?:Oops: )?[\w ,.-]+: [0-9a-f]{4} \[#\d+\]|Oops: [^\[]*\[#\d+\]|BUG: kernel NULL pointer dereference"
         r"|BUG: unable to handle (?:kernel |page fault)|kernel BUG at \S+!|Kernel BUG at \S+ \[verbose debug info"
         r"|\bInternal error: [\w ]+:|kernel tried to execute NX-protected page|(?:traps: )?PANIC: double fault,",
         "kernel-oops", S.CRITICAL, A.REBOOT, KERNEL + " die() headers (arch/x86/kernel/dumpstack.c, "
         "arch/arm64/kernel/traps.c, arch/x86/mm/fault.c)", "kernel state is undefined after an oops"),
    # RCU CPU stall warnings (kernel/rcu/tree_stall.h print_cpu_stall / print_other_cpu_stall, older
    # "rcu_sched_state"; Documentation/RCU/stallwarn.rst): a CPU has not passed a quiescent state for
    # CONFIG_RCU_CPU_STALL_TIMEOUT (21 s by default), no grace period ends, freed memory is not reclaimed
    # ("Unless rcu_sched kthread gets sufficient CPU time, OOM is now expected behavior").
    Rule("rcu-stall", "kernel-log",
         r"(?:rcu: )?INFO: rcu_\w+ (?:self-detected stall on CPU|detected stalls? on CPU|detected stall, but suppressed)"
         r"|INFO: rcu_\w+_state detected stalls? on CPU",
         "cpu-rcu-stall", S.CRITICAL, A.REBOOT, KERNEL + " RCU (kernel/rcu/tree_stall.h, stallwarn.rst)",
         "a CPU stuck in the kernel for 21 s or more; reclaim stops behind it"),
    Rule("block-io-error", "kernel-log",
         r"(?:blk_update_request: )?(?:I/O|critical medium|critical target) error, "
         r"dev (?P<device>nvme\d+n\d+|xvd[a-z]+|sd[a-z]+),"
         r"|Buffer I/O error on dev(?:ice)? (?P<xdev>nvme\d+n\d+(?:p\d+)?|xvd[a-z]+\d*),",
         "block-io-error", S.WARNING, A.NONE, KERNEL + " block layer",
         "one failed request is often transient (a path failover, a detached volume); repeated errors on the "
         "same device are block-io-error-repeated"),
)
_add(
    # fs/xfs/xfs_log.c: xlog_ioend_work "log I/O error %d" (then xlog_force_shutdown), older xfs_log_force
    # "xfs_log_force: error %d returned."; the log device failed a write: the filesystem is shut down.
    Rule("xfs-log-io-error", "kernel-log",
         r"XFS \((?P<device>[\w/.-]+)\): (?:log I/O error -?\d+|xfs_log_force: error -?\d+ returned)",
         "filesystem-read-only", S.CRITICAL, A.REBOOT, KERNEL + " XFS (fs/xfs/xfs_log.c)",
         "the log cannot be written: XFS shuts the filesystem down"),
    # drivers/nvme/host/pci.c nvme_warn_reset "controller is down" when CSTS.CFS (controller fatal status) is set or
    # the register reads all ones (the device is gone from PCIe); nvme_reset_work gives up (v6.1 / v6.12 wording) or
    # brings back no I/O queue (the namespaces are removed).
    Rule("nvme-controller-down", "kernel-log",
         r"(?:nvme )?(?P<device>nvme\d+): (?:controller is down; will reset: CSTS=0x[0-9a-f]+"
         r"|Removing after probe failure status: -?\d+|Disabling device after reset failure: -?\d+"
         r"|IO queues (?:lost|not created))",
         "nvme-controller-down", S.CRITICAL, A.REBOOT, KERNEL + " NVMe (drivers/nvme/host/pci.c); NVMe base "
         "specification 'Controller Fatal Status Condition': host software should reset the controller",
         "the root EBS volume or a local NVMe disk stopped answering; repeated after a reboot -> replacement"),
    # Host memory: memory_failure() (mm/memory-failure.c, pr_fmt "Memory failure: "; before 4.x "MCE %#lx: ..."):
    # a DRAM page had an uncorrectable error; its printers are catalog rows mf-*. Soft offline of corrected pages
    # and root's hwpoison injection ("Injecting memory failure ...") are not faults.
    Rule("memory-failure", "kernel-log",
         r"(?:Memory failure: |MCE )0x[0-9a-f]+: (?:recovery action for|unhandlable page|already hardware poisoned"
         r"|Sending SIGBUS to .* due to hardware memory corruption|memory outside kernel control|[\w -]*page"
         r"|forcibly killing .* because of failure to unmap corrupted page)"
         r"|MCE: Killing .*:\d+ due to hardware memory corruption fault at [0-9a-f]+",
         "host-memory-uncorrectable", S.CRITICAL, A.REPLACE, KERNEL + " (mm/memory-failure.c)",
         "memory_failure() ran: a DRAM page had an uncorrectable error (recovered or not, the DIMM is failing)"),
    # XFS flags 0x4 (SHUTDOWN_FORCE_UMOUNT, fs/xfs/xfs_mount.h): root's XFS_IOC_GOINGDOWN, not a fault.
    Rule("fs-remount-ro", "kernel-log",
         r"(?:EXT4-fs \((?P<device>[\w/.-]+)\): Remounting filesystem read-only"
         r"|XFS \((?P<xdev>[\w/.-]+)\): (?:(?!.*\(0x[0-9a-f]*[4-7c-f]\) detected at).*Shutting down filesystem"
         r"|Filesystem has been shut down due to))",
         "filesystem-read-only", S.CRITICAL, A.REBOOT, KERNEL, "filesystem error forced it read-only"),
    # ext4's own record of an earlier error (ext4_clear_journal_err, ext4_setup_super): the filesystem needs e2fsck.
    Rule("fs-error", "kernel-log", r"EXT4-fs (?:error \(device (?P<device>[\w/.-]+)\)|(?:warning \(device |\()"
         r"(?P<xdev>[\w/.-]+)\): (?:\w+:\d+: Filesystem error recorded from previous mount|warning: mounting fs "
         r"with errors))",
         "filesystem-error", S.WARNING, A.NONE, KERNEL, "a read-only remount, if it follows, is acted on"),
    Rule("soft-lockup", "kernel-log", r"watchdog: BUG: soft lockup - CPU#(?P<device>\d+) stuck for",
         "cpu-soft-lockup", S.WARNING, A.NONE, KERNEL,
         "one short soft lockup is often load; repeated ones are soft-lockup-repeated"),
    Rule("hung-task", "kernel-log", r"INFO: task \S+ blocked for more than \d+ seconds",
         "hung-task", S.WARNING, A.NONE, KERNEL),
    Rule("oom-kill", "kernel-log", r"Out of memory: Killed process \d+ \((?P<device>[^)]*)\)",
         "oom-kill", S.WARNING, A.NONE, KERNEL, "an application exceeded memory; kubelet handles it"),
    Rule("memory-uncorrectable", "kernel-log",
         r"EDAC MC(?P<device>\d+): \d+ UE |(?:mce: )?(?:Uncorrected hardware memory error in user-access"
         r"|Memory error not recovered|Kernel accessed poison in user space at [0-9a-f]+)",
         "host-memory-uncorrectable", S.CRITICAL, A.REPLACE, KERNEL + " (drivers/edac/edac_mc.c, "
         "arch/x86/kernel/cpu/mce/core.c kill_me_maybe / do_machine_check)", "uncorrectable host DRAM error"),
    Rule("nvme-timeout", "kernel-log", r"nvme (?P<device>nvme\d+): I/O (?:tag )?\d+ (?:\([0-9a-f]{4}\) )?"
         r"(?:opcode (?:0x)?[0-9a-f]+ )?(?:\([^)]*\) )?QID \d+ timeout", "nvme-timeout", S.WARNING, A.NONE, KERNEL),
)

# ---------------------------------------------------------------- polled probes
_add(
    Rule("gpu-count", "nvml", "GPUs visible < accelerator_count of the instance type", "gpu-missing",
         S.CRITICAL, A.REBOOT, TABLE, "often a GPU off the bus; repeated -> replacement"),
    Rule("gpu-tool-missing", "nvml", "NVML / nvidia-smi unavailable on an NVIDIA instance type", "gpu-driver-missing",
         S.CRITICAL, A.REBOOT, TABLE, "nothing on CPU nodes"),
    Rule("gpu-lost", "nvml", "NVML answers NVML_ERROR_GPU_IS_LOST for a GPU", "gpu-lost", S.CRITICAL, A.REBOOT,
         NVML_LOST, "off the bus without (or before) an Xid 79 line; repeated -> replacement"),
    Rule("gpu-fabric-not-registered", "nvml", "NVSwitch fabric state Not Started / In Progress past the grace period",
         "nvlink-fabric-not-registered", S.CRITICAL, A.REBOOT, FABRIC,
         "Fabric Manager down or stuck: no NVLink P2P; a reboot restarts it and retrains the fabric"),
    Rule("gpu-fabric-error", "nvml", "NVSwitch fabric state Completed with a status other than Success",
         "nvlink-fabric-error", S.CRITICAL, A.REBOOT, FABRIC, "fabric registration failed"),
    Rule("gpu-dbe", "nvml", "volatile uncorrectable ECC errors > 0", "gpu-double-bit-ecc", S.CRITICAL, A.REBOOT, NVML),
    Rule("gpu-remap-failure", "nvml", "row remapping failure occurred", "gpu-row-remap-failure",
         S.CRITICAL, A.REPLACE, NVML),
    Rule("gpu-remap-pending", "nvml", "row remapping pending", "gpu-row-remap-pending", S.WARNING, A.REBOOT, NVML,
         "a reset activates the spare row"),
    Rule("gpu-reset-required", "nvml", "GPU Reset Status: Reset Required = Yes", "gpu-reset-required",
         S.CRITICAL, A.REBOOT, NVML),
    Rule("gpu-thermal", "nvml", "HW thermal slowdown active", "gpu-thermal-slowdown", S.WARNING, A.NONE, NVML),
    Rule("gpu-power-brake", "nvml", "HW power brake slowdown active", "gpu-power-brake", S.WARNING, A.NONE, NVML),
    Rule("gpu-pcie-degraded", "nvml", "PCIe link width current < max", "gpu-pcie-link-degraded",
         S.CRITICAL, A.REBOOT, NVML, "link generation is not compared: it drops at idle by design"),
    Rule("gpu-nvlink-down", "nvml", "an NVLink link inactive while others are active", "gpu-nvlink-down",
         S.CRITICAL, A.REBOOT, NVML),
    Rule("gpu-nvlink-errors", "nvml", "NVLink replay/recovery/CRC counters rose above the threshold",
         "gpu-nvlink-errors", S.WARNING, A.NONE, NVML),
    Rule("neuron-count", "neuron", "neuron-ls devices < accelerator_count of the instance type", "neuron-device-missing",
         S.CRITICAL, A.REBOOT, TABLE),
    Rule("neuron-tool-missing", "neuron", "neuron-ls unavailable on a Neuron instance type", "neuron-driver-missing",
         S.CRITICAL, A.REBOOT, TABLE, "nothing on CPU/GPU nodes"),
    Rule("neuron-hbm-ecc-uncorrected", "neuron", "sysfs neuron<N>/stats/hardware/mem_ecc_uncorrected > 0",
         "neuron-hbm-uncorrectable", S.CRITICAL, A.REPLACE, NEURON_SYSFS,
         "unrepairable uncorrected DRAM ECC events; same fault and action as NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR"),
    Rule("neuron-sram-ecc-uncorrected", "neuron", "sysfs neuron<N>/stats/hardware/sram_ecc_uncorrected > 0",
         "neuron-sram-uncorrectable", S.CRITICAL, A.REPLACE, NEURON_SYSFS,
         "same fault and action as NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR"),
    Rule("neuron-hbm-ecc-repairable", "neuron",
         "sysfs neuron<N>/stats/hardware/mem_ecc_repairable_uncorrected > 0", "neuron-hbm-repairable",
         S.WARNING, A.NONE, NEURON_SYSFS, "watched: the guide does not say what repairs it or when"),
    Rule("efa-count", "efa", "EFA devices in /sys/class/infiniband < EFA cards of the instance type",
         "efa-device-missing", S.CRITICAL, A.REBOOT, TABLE, "nothing on instance types without EFA"),
    Rule("efa-port-down", "efa", "EFA port state is not ACTIVE", "efa-port-down", S.CRITICAL, A.REBOOT, EFA_DRIVER),
    Rule("efa-counters", "efa", "EFA error counters rose above the threshold between polls", "efa-errors",
         S.WARNING, A.NONE, EFA_DRIVER, "often the remote peer; watched"),
    Rule("fs-readonly", "host", "a watched mount (/, kubelet, local NVMe) is mounted read-only",
         "filesystem-read-only", S.CRITICAL, A.REBOOT, KERNEL),
    Rule("fs-full", "host", "a watched mount is fuller than the threshold", "filesystem-full",
         S.WARNING, A.NONE, KERNEL, "kubelet image/pod eviction is the remedy"),
    Rule("memory-pressure", "host", "MemAvailable below the threshold or PSI full avg10 above it",
         "host-memory-pressure", S.WARNING, A.NONE, KERNEL),
    Rule("kubelet-unhealthy", "host", "kubelet /healthz does not answer ok", "kubelet-unhealthy",
         S.CRITICAL, A.REBOOT, KERNEL),
    Rule("containerd-down", "host", "containerd socket refuses connections", "containerd-down",
         S.CRITICAL, A.REBOOT, KERNEL),
    # Deep health checks (node start and on demand).
    Rule("dcgm-diag-fail", "deep-check", "dcgmi diag -r N reports a test Fail", "gpu-diagnostic-failed",
         S.CRITICAL, A.REPLACE, DEEP),
    Rule("nccl-busbw-low", "deep-check", "all_reduce_perf busbw at the largest size < allreduce_busbw_floor_gbs",
         "nccl-bandwidth-low", S.CRITICAL, A.REPLACE, DEEP),
    Rule("nccl-wrong", "deep-check", "all_reduce_perf reports #wrong > 0 or out-of-bounds values",
         "nccl-wrong-results", S.CRITICAL, A.REPLACE, DEEP),
    Rule("efa-loopback-fail", "deep-check", "fi_pingpong -p efa loopback exits non-zero or loses messages",
         "efa-loopback-failed", S.CRITICAL, A.REPLACE, DEEP),
    Rule("neuron-check-fail", "deep-check", "nccom-test fails or reports no bandwidth", "neuron-collectives-failed",
         S.CRITICAL, A.REPLACE, DEEP),
    Rule("deep-check-tool-missing", "deep-check", "a deep check's tool is not installed", "deep-check-skipped",
         S.WARNING, A.NONE, DEEP, "step skipped with a message; other steps still decide"),
    Rule("deep-check-error", "deep-check", "a deep check's output cannot be parsed or it timed out",
         "deep-check-error", S.CRITICAL, A.REPLACE, DEEP, "a node that cannot prove health is not trusted"),
    Rule("soft-lockup-repeated", "kernel-log-repeat",
         "soft-lockup on this node 3 times within 600 s of log time (REPEATS)",
         "cpu-soft-lockup-repeated", S.CRITICAL, A.REBOOT, KERNEL + " watchdog",
         "a CPU that keeps locking up is not load; a reboot clears a wedged driver, recurrence escalates"),
    Rule("block-io-error-repeated", "kernel-log-repeat",
         "block-io-error on the same device 10 times within 600 s of log time (REPEATS)",
         "block-io-error-repeated", S.CRITICAL, A.REBOOT, KERNEL + " block layer",
         "root EBS volume or local NVMe that keeps failing I/O; repeated after a reboot -> replacement"),
    Rule("ebs-data-volume-failed", "kernel-log-volume",
         "nvme-controller-down, block-io-error-repeated, xfs-log-io-error or fs-remount-ro on an EBS volume that "
         "backs none of the watched mounts (sysfs model 'Amazon Elastic Block Store')", "ebs-data-volume-failed",
         S.WARNING, A.NONE, KERNEL + "; AWS EC2 User Guide 'Amazon EBS and NVMe' (model string)",
         "a hot-attached data volume is the workload's: the node itself is fine, rebooting it would not help"),
    # The agent itself.
    Rule("config-invalid", "agent", "a config section fails validation", "agent-config-invalid",
         S.WARNING, A.NONE, "openpod node agent", "that check is disabled with a message; the others run"),
    Rule("check-crashed", "agent", "a probe raised an unexpected error", "agent-check-error",
         S.WARNING, A.NONE, "openpod node agent", "logged with the error; the other checks keep running"),
)


@dataclass(frozen=True)
class Repeat:
    """A kernel-log rule that acts only when it repeats: ``count`` findings within ``window_s`` of log time."""

    base: str          # the single-line rule
    rule: str          # the rule it becomes on the count-th line within the window
    count: int
    window_s: float
    per_device: bool   # count per device (a disk) or per node (any CPU)
    why: str


# Thresholds are openpod's engineering choices (no vendor publishes one); the live agent and `diagnose` read them
# from here through node_agent.kernel_engine, on the log's own time axis.
REPEATS: dict[str, Repeat] = {r.base: r for r in (
    Repeat("soft-lockup", "soft-lockup-repeated", 3, 600.0, False,
           "the watchdog fires after 2 x watchdog_thresh = 20 s (Documentation/admin-guide/lockup-watchdogs.rst): one "
           "is often load, three in ten minutes a CPU or driver that keeps wedging"),
    Repeat("block-io-error", "block-io-error-repeated", 10, 600.0, True,
           "the block layer prints each failed request (block/blk-mq.c blk_print_req_error, rate-limited): one is "
           "often a transient path or volume event, ten on one device in ten minutes a failing device"),
)}

RULES: dict[str, Rule] = {r.id: r for r in _RULES}
assert len(RULES) == len(_RULES), "duplicate rule id"

KERNEL_RULES: tuple[Rule, ...] = tuple(r for r in _RULES if r.probe == "kernel-log")
def rule(rule_id: str) -> Rule:
    return RULES[rule_id]


def rules_markdown() -> str:
    """The rule table as a Markdown page (rendered into docs/node-agent-rules.md)."""
    out = [
        "# Node agent rules",
        "",
        "Generated from `node_agent/rules.py` by `python -m infra docs`; do not edit by hand.",
        "",
        "Each row: what is matched, the fault it means, its severity, what the node needs "
        "(`none` = Event and metric only; `reboot`; `replace` = Auto Scaling replaces the instance) "
        "and where the classification comes from. Kernel-log rows are tried top to bottom, first match wins. "
        "A node rebooted for the same fault within the escalation window is replaced instead.",
        "",
        "Xid rows (`xid-<code>`) come from `node_agent/catalog/xids.csv`, one row per code of NVIDIA's Xid catalog "
        "as published in NVIDIA/NVSentinel's `xiderrorsmapping.csv`; each row's source column names the catalog's "
        "mnemonic and resolution. Resolution -> action: RESTART_APP, IGNORE, WORKFLOW_XID_45, CHECK_UVM, "
        "CHECK_MECHANICALS, UPDATE_SWFW -> none; RESET_GPU, RESTART_BM, RESTART_VM, WORKFLOW_XID_48, the NVLink "
        "workflows and UNEXPECTED_ERR_REPORT_ISSUE -> reboot; Xid 64 (row-remap/retirement failure) -> replace. "
        "A code newer than the catalog takes the documented default of `xid-unlisted`.",
        "",
        "SXid rows (`sxid-<code>`) come from `node_agent/catalog/sxids.csv` (NVSentinel's `sxiderrorsmapping.csv`), "
        "decoded by code on every SXid line but the `Severity` continuation: IGNORE, CHECK_FM_CONFIG -> none; "
        "RESET_FABRIC, RESET_GPU, WORKFLOW_NVLINK_POTENTIALY_FATAL_ERR, (UNEXPECTED_ERR_)REPORT_ISSUE -> reboot; "
        "INVESTIGATE_LINK_SI, RUN_FIELDDIAG, CHECK_LINK_MECHANICAL_CONNECTIONS, CHECK_THERMALS -> replace. "
        "A line on which the driver prints `Non-fatal` is `sxid-nonfatal`; an unknown code's `Fatal` line is "
        "`sxid-fatal`.",
        "",
        "Kernel-log rows match anchored at the start of the message, after the log format's own prefix "
        "(`node_agent/logformat.py`); records user space wrote and records whose text a user process shapes "
        "(segfault, trap and audit reports) match no row. The `printers` column names the rows of the printer "
        "catalog (`node_agent/catalog/printers.csv`, table below) that the rule classifies.",
        "",
        "| rule | probe | match | fault | severity | action | source | note | printers |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in _RULES:
        match = r.match.replace("|", "\\|")
        rows = ", ".join(printers.rows_of(r.id))
        out.append(f"| `{r.id}` | {r.probe} | `{match}` | {r.fault} | {r.severity.value} | **{r.action.value}** "
                   f"| {r.source} | {r.note} | {rows} |")
    out += ["", "## Printer catalog", "",
            "Generated from `node_agent/catalog/printers.csv`. Each row is one printer read from its source "
            "(NVIDIA rows at the driver tags named; Linux rows at linux-stable v6.12.107, v6.1.172 in the notes). "
            "`user text`: what of the line a user process can choose; `rule` `-`: no rule may act on it.", "",
            "| id | subsystem | format | source | class | action | why | user text | rule |",
            "|---|---|---|---|---|---|---|---|---|"]
    for p in printers.PRINTERS:
        fmt = p.format.replace("|", "\\|")
        out.append(f"| `{p.id}` | {p.subsystem} | `{fmt}` | {p.source} | {p.fault_class} | {p.action} | {p.why} "
                   f"| {p.user_text} | {p.rule} |")
    return "\n".join(out) + "\n"
