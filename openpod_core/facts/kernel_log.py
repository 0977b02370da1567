"""The kernel log as the node agent reads it (``docs/node-agent.md``): who can write a record, what identifies a
disk, what decides a machine check's class. The printers themselves are rows of node_agent/catalog/printers.csv."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "linux.devkmsg-write-facility", "LOG_USER unless the writer names a non-zero facility; never 0 (kernel)",
        "https://github.com/torvalds/linux/blob/master/kernel/printk/printk.c (devkmsg_write: 'If no prefix or "
        "no userspace facility is specified, we enforce LOG_USER, to be able to reliably distinguish "
        "kernel-generated messages from userspace-injected ones'; if (LOG_FACILITY(u) != 0) facility = "
        "LOG_FACILITY(u))", "2026-11-28",
        "a /dev/kmsg record with facility (prio >> 3) other than 0 came from user space: the follower skips it",
    ),
    Fact(
        "systemd.journald-kmsg-facility", "SYSLOG_FACILITY=LOG_FAC(priority), _TRANSPORT=kernel for every record",
        "https://github.com/systemd/systemd/blob/main/src/journal/journald-kmsg.c (dev_kmsg_record)", "2026-11-28",
        "journalctl -k shows user-written /dev/kmsg records too; their SYSLOG_FACILITY is not 0",
    ),
    Fact(
        "linux.x86-segfault-report",
        "%s%s[%d]: segfault at %lx ip %px sp %px error %lx, then print_vma_addr's ' in %pD[%lx,%lx+%lx]' "
        "(v6.12.107: the mapped file's name, the offset in it, the mapping's start and size) or ' in %s[%lx+%lx]' "
        "(v6.1.172: kbasename of the file's path, the mapping's start and size)",
        "gregkh/linux@v6.12.107:arch/x86/mm/fault.c:759 (show_signal_msg; print_vma_addr(KERN_CONT \" in \", ...) "
        "763; mm/memory.c:6736 printk(\"%s%pD[%lx,%lx+%lx]\"); v6.1.172: fault.c:771, 775, mm/memory.c:5834 "
        "printk(\"%s%s[%lx+%lx]\", prefix, kbasename(p), ...))", "2026-11-29",
        "printed at KERN_INFO with facility kernel; the task chooses its comm and the mapped file's name",
    ),
    Fact(
        "intel.mci-status-uc-pcc", "UC = bit 61 (uncorrected), PCC = bit 57 (processor context corrupt)",
        "gregkh/linux@v6.12.107:arch/x86/include/asm/mce.h:37 (MCI_STATUS_UC BIT_ULL(61); MCI_STATUS_PCC "
        "BIT_ULL(57) 41; v6.1.172:35, 39; Intel SDM vol. 3B, IA32_MCi_STATUS)", "2026-11-29",
        "node_agent.kernel_match.mce_status_rule decodes the status word mce/core.c __print_mce prints",
    ),
    Fact(
        "linux.cper-severity-strs", "recoverable, fatal, corrected, info",
        "gregkh/linux@v6.12.107:drivers/firmware/efi/cper.c:59 (severity_strs 60-63; cper_estatus_print 729 "
        "'event severity: %s'; cper_estatus_print_section 619 'Error %d, type: %s', 638/646/656/665/676 "
        "'section_type: general processor error' | 'memory error' | 'PCIe error' | 'ARM processor error' | "
        "'IA32/X64 processor error'; v6.1.172:58, 693, 599, 610/618/628/637/648)", "2026-11-29",
        "node_agent.kernel_engine classes a recoverable record by its section type",
    ),
    Fact(
        "nvidia.nv-err-reset-required", "NV_ERR_RESET_REQUIRED = 0x00000062 'Reset required'",
        "NVIDIA/open-gpu-kernel-modules@570.195.03:kernel-open/common/inc/nvstatuscodes.h:127", "2026-11-28",
        "nvstatusToString prints 'Reset required [NV_ERR_RESET_REQUIRED]' in NVRM assertion lines",
    ),
    Fact(
        "nvidia.rm-printf-release-level",
        "a release RM prints NV_PRINTF at LEVEL_ERROR and LEVEL_FATAL; LEVEL_WARNING and LEVEL_NOTICE only where an "
        "NVreg_RmMsg rule forces them",
        "NVIDIA/open-gpu-kernel-modules@570.195.03:src/nvidia/src/kernel/diagnostics/nvlog_printf.c:140 "
        "(nvDbg_PrintMsg: debuglevel_min = LEVEL_ERROR unless DEVELOP/DEBUG/QA_BUILD; 167 if (debuglevel >= "
        "debuglevel_min); src/nvidia/Makefile:136 -DNV_PRINTF_STRINGS_ALLOWED=1; 535.261.03: 140, 167, Makefile:130; "
        "580.105.08: 140, 167, Makefile:137)", "2026-11-29",
        "tools/printer_candidates.py --level warning lists NV_PRINTF LEVEL_WARNING calls, which a node's log has only "
        "with RmMsg set",
    ),
    Fact(
        "nvidia.nv-printf-default-level", "nv_printf prints NV_DBG_WARNINGS (3) and NV_DBG_ERRORS (4) by default",
        "NVIDIA/open-gpu-kernel-modules@570.195.03:kernel-open/nvidia/os-interface.c:823 (cur_debuglevel = "
        "0xffffffff; 842 if (debuglevel >= ((cur_debuglevel >> 4) & 0x3)); kernel-open/common/inc/os-interface.h:248 "
        "NV_DBG_WARNINGS 0x3; 535.261.03: 775, 794; 580.105.08: 828, 847)", "2026-11-29",
        "kernel-open's nv_printf / NV_DEV_PRINTF warnings do reach the log",
    ),
    Fact(
        "nvidia.nvswitch-print-release", "NVSWITCH_PRINT is ((void)0) in release builds; NVSWITCH_PRINT_SXID always "
        "prints (nvswitch_os_print at NVSWITCH_DBG_LEVEL_ERROR)",
        "NVIDIA/open-gpu-kernel-modules@570.195.03:src/common/nvswitch/kernel/inc/common_nvswitch.h:116 (#else of "
        "DEVELOP || DEBUG || NV_MODS); 158 NVSWITCH_PRINT_SXID; 535.261.03: 113, 152; 580.105.08: 116, 158)",
        "2026-11-29", "a switch's faults reach a node's log as SXid lines only",
    ),
    Fact(
        "nvidia.uvm-err-print-gated", "UVM_ERR_PRINT prints only when the uvm_debug_prints module parameter is set "
        "(default: debug and develop builds only); UVM_ERR_PRINT_ALWAYS and UVM_INFO_PRINT always print",
        "NVIDIA/open-gpu-kernel-modules@570.195.03:kernel-open/nvidia-uvm/uvm_common.h:95 "
        "(UVM_PRINT_FUNC_PREFIX_CHECK); uvm_common.c:30 uvm_debug_prints = UVM_IS_DEBUG() || UVM_IS_DEVELOP(); "
        "535.261.03: 86, 30; 580.105.08: 95, 30)", "2026-11-29",
        "nvidia-uvm's 'Encountered a global fatal error' is not in a default log; RM's nvGpuOpsReportFatalError "
        "line is (catalog row nv-uvm-fatal)",
    ),
    Fact(
        "neuron.driver-printk-ioctl", "NEURON_IOCTL_PRINTK: printk(KERN_ERR \"%s\") of a user buffer (< 512 bytes)",
        "aws-neuron/aws-neuron-driver@fca19f7:neuron_cdev.c:2003-2022 (ncdev_printk; dispatched at 2608-2609 from "
        "ncdev_misc_ioctl, taken for a device opened write-only: 50, 2647)", "2026-11-28",
        "any process that can open /dev/neuronN writes a kernel-facility record; NEURON_HW_ERR lines come this way "
        "(the driver prints none): the agent records them and binds vendor rules to the node's accelerator",
    ),
    Fact(
        "aws.ebs-nvme-model", "Amazon Elastic Block Store",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/nvme-ebs-volumes.html (nvme id-ctrl: 'mn : Amazon "
        "Elastic Block Store')", "2026-11-28",
        "the NVMe controller model of an EBS volume (/sys/class/nvme/nvmeN/model): node_agent.host tells a "
        "hot-attached data volume from the node's own disks",
    ),
)
