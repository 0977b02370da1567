"""The NVIDIA driver's kernel-log rules without an Xid: GPU init failures, GSP/FSP firmware timeouts, the driver's
own reset-required status, a GPU fallen off the bus. Rows of node_agent/rules.py's table (tried in its order, after
the Xid and SXid rows); the printers they classify are the ``nv-*`` rows of node_agent/catalog/printers.csv.
"""

from __future__ import annotations

from node_agent.findings import Action as A, Rule, Severity as S

# GPU init / firmware without an Xid.
# NVIDIA/open-gpu-kernel-modules (checked 2026-11-25): osinit.c RmInitAdapter "RmInitAdapter failed! (0x%x:0x%x:%d)"
# and "RmInitAdapter: Cannot initialize GSP firmware RM"; kernel_gsp.c _kgspBootGspRm "unexpected WPR2 already up"
# ("the GPU is likely in a bad state and may need to be reset"), _kgspRpcRecvPoll "GSP RM heartbeat timed out" /
# "LibOS heartbeat timed out" / "Timeout waiting for RPC from GSP"; kgspWaitForGfwBootOk / gpuWaitForGfwBootComplete
# "failed to wait for GFW boot complete"; kern_fsp.c kfspPollForResponse "FSP command timed out" and FSP boot
# (kfspWaitForSecureBoot); kernel_falcon "Timeout waiting for RISC-V to halt"; kernel_rc_watchdog.c "RC watchdog:
# GPU is probably locked!"; Hopper's GSP boot "Timeout waiting for GSP target mask release"; the FSP's queue and async
# command timeouts; kgspHealthCheck's "GSP Failure" banner (535) and "GSP timed out. Triggering TDR." (580). Each
# printer is a catalog row. The GPU cannot be used until it is reset: a node reboot resets every GPU.
# NV_PRINTF's prefix (src/nvidia/inc/libraries/utils/nvprintf.h NV_PRINTF_PREFIX "NVRM" + ": "), then the GPU
# ("GPU%u " / "GPU %04x:%02x:%02x.%x: ") and the function: optional here, a copied line often lost them.
_NV = r"(?:NVRM:? )?(?:GPU ?\d+:? |GPU [0-9a-fA-F:.]+: )?"
GPU_INIT = "NVIDIA driver (open-gpu-kernel-modules osinit.c, kernel_gsp.c, kern_fsp.c, kernel_rc_watchdog.c)"
NVIDIA_DRIVER_RULES: tuple[Rule, ...] = (
    Rule("gpu-init-failed", "kernel-log",
         r"NVRM: (?:GPU (?P<device>[0-9a-fA-F:.]+): )?(?:RmInitAdapter failed!|rm_init_adapter failed, device minor"
         r"|No interrupts of any type are available\. Cannot use this GPU)"
         r"|" + _NV + r"The NVIDIA probe routine failed for \d+ device"
         r"|" + _NV + r"kfspWaitForSecureBoot\w*: .*(?:fail|timed? ?out)"
         r"|" + _NV + r"(?:\w+:? )?(?:Assertion failed: )?(?:Cannot initialize GSP firmware RM"
         r"|unexpected WPR2 already up|\(the GPU is likely in a bad state|failed to wait for GFW[_ ]BOOT"
         r"|failed to wait for GFW boot complete|\*\*\* Cannot attach gpu|osInitNvMapping failed|Failed to boot GSP"
         r"|GSP-FMC reported an error (?:while attempting to boot GSP|prior to SPDM boot)"
         r"|Timeout waiting for lockdown release|Timed out waiting for GSP falcon reset to (?:de)?assert"
         r"|(?:SEC2 GSP Boot:)?Timeout waiting for GSP target mask release|FSP secure boot partition timed out"
         r"|(?:Preparing )?FSP boot cmds failed\. RM cannot boot"
         r"|failed to execute Booter Load|GspMsgQueueInit failed|init RPC infrastructure failed"
         r"|\w+(?:\(\))? failed, bailing out of RmInitAdapter|FSP boot command failed"
         r"|Timeout waiting for SEC2-RTOS to resume GSP-RM|failed to extract VBIOS image from ROM"
         r"|failed to parse FWSEC ucode from VBIOS image|Error preparing (?:GSP-RM|boot binary) image)",
         "gpu-init-failed", S.CRITICAL, A.REBOOT, GPU_INIT,
         "the driver could not bring the GPU up (firmware, GSP or VBIOS boot); repeated -> replacement"),
    # nvstatuscodes.h NV_STATUS_CODE(NV_ERR_RESET_REQUIRED, 0x00000062, "Reset required"); nvassert.c
    # nvAssertOkFailedNoLog / nvCheckOkFailedNoLog "Assertion failed: %s (0x%08X) returned from ..." ("Check
    # failed: ...") with nvstatusToString's "Reset required [NV_ERR_RESET_REQUIRED]". Only these printers: an NVRM
    # line can carry user text (osapi.c "NVRM: API mismatch: the client has the version %s", the client's own
    # version string), so the status named anywhere in a line is not the driver's verdict.
    Rule("gpu-reset-required-status", "kernel-log",
         _NV + r"(?:\w+:? )?(?:(?:Assertion|Check) failed: Reset required \[NV_ERR_RESET_REQUIRED\] \(0x0*62\)"
         r"|Assertion failed: osDoFunctionLevelReset failed!)",
         "gpu-reset-required", S.CRITICAL, A.REBOOT, GPU_INIT + "; kernel-open/common/inc/nvstatuscodes.h",
         "the driver's own status, or its failed function-level reset: the GPU needs a reset (a node reboot resets "
         "every GPU)"),
    Rule("gpu-firmware-timeout", "kernel-log",
         _NV + r"(?:_kgspRpcRecvPoll: (?:GSP RM|LibOS) heartbeat timed out"
         r"|_kgspIsHeartbeatTimedOut: Heartbeat timed out"
         r"|(?:\w+: )?Timeout waiting for RPC from GSP|\w+: FSP command timed out"
         r"|\w+: Timeout waiting for RISC-V to halt|\w+: RC watchdog: GPU is probably locked"
         r"|(?:\w+:? )?\*+ GSP (?:Timeout|Failure) \*+|\w+: Assertion failed: Back to back GSP RPC timeout detected"
         r"|\w+: (?:Timed out waiting for FSP queues to be empty|FSP async command timed out"
         r"|Assertion failed: GSP timed out\. Triggering TDR)"
         r"|Rate limiting GSP RPC error prints for GPU at PCI:[0-9a-f:]+ \(printing 1 of every \d+\)\.  The GPU likely "
         r"needs to be reset)",
         "gpu-firmware-timeout", S.CRITICAL, A.REBOOT, GPU_INIT,
         "the GPU's GSP/FSP firmware or engines stopped answering; the driver asks for a reset"),
    # GPU lost without an Xid; Hopper/Blackwell's SEC_FAULT lockdown (gpuHandleSecFault_*, LEVEL_FATAL): the GPU answers
    # only dummy values until reset and RM takes it down (osHandleGpuLost); its Xid 110 needs a fault bit set.
    Rule("gpu-fallen-off-bus", "kernel-log",
         r"NVRM: (?:GPU (?P<device>[0-9A-Fa-f:.]+): GPU has fallen off the bus"
         r"|(?:The NVIDIA GPU (?P<xdev>[0-9A-Fa-f:.]+) .*)?fallen off the bus and is not responding to commands)"
         r"|" + _NV + r"\w+: Timeout (?:polling GPU back on bus|GPU not back on the bus after)"
         r"|" + _NV + r"\w+: SEC_FAULT lockdown detected\. This is fatal\. RM will now shut down",
         "gpu-fell-off-bus", S.CRITICAL, A.REBOOT, "NVIDIA driver (open-gpu-kernel-modules nv_printf)",
         "same fault as Xid 79 (RESTART_BM), printed even when no Xid is (probe, a reset the GPU did not come back "
         "from); repeated -> replacement"),
    # NVLink degraded mode (kernel_nvlinkstate.c knvlinkSetDegradedMode, kernel_nvlink.c
    # knvlinkAbortUncontainedErrorRecovery_WORKITEM; R570+): an NVLink fatal error the driver could not contain or
    # recover took the GPU out of the NVLink fabric.
    Rule("gpu-nvlink-degraded", "kernel-log",
         _NV + r"\w+: (?:GPU\d+ marked Degraded\. Error originated on linkId \d+"
         r"|Failed to recover from uncontained NVLINK error\. Triggering Degraded Mode)",
         "gpu-nvlink-degraded", S.CRITICAL, A.REBOOT, "NVIDIA driver (open-gpu-kernel-modules kernel_nvlinkstate.c, "
         "kernel_nvlink.c)", "no NVLink P2P for this GPU until a reset; repeated -> replacement"),
    # UVM's global fatal error (R570+): nvidia-uvm's uvm_global_set_fatal_error reports it to RM, whose
    # nvGpuOpsReportFatalError (rmapi/nv_gpu_ops.c) prints this and sets sysSetRecoveryRebootRequired; nvidia-uvm's
    # own line is a UVM_ERR_PRINT, printed only with uvm_debug_prints=1.
    Rule("gpu-uvm-fatal", "kernel-log",
         _NV + r"(?:\w+: )?uvm encountered global fatal error 0x[0-9a-fA-F]+, requiring os reboot to recover",
         "gpu-uvm-fatal", S.CRITICAL, A.REBOOT, "NVIDIA driver (open-gpu-kernel-modules rmapi/nv_gpu_ops.c)",
         "nvidia-uvm stopped on a fatal error; /dev/nvidia-uvm cannot be opened (no new CUDA process) until a reboot"),
)
