"""NVML events alongside the kernel log: a missed, dropped or rate-limited kmsg line still raises the fault.

The driver reports each Xid both to the kernel log and to NVML event sets
(``nvmlEventTypeXidCriticalError``, event data = the Xid code), and each
uncorrectable ECC error as ``nvmlEventTypeDoubleBitEccError`` (NVML API reference,
"Event Handling Methods" / nvmlEventSetWait_v2 and nvmlEventType*; constants as
in nvidia-ml-py 13.615.71 ``pynvml.py``; checked 2026-11-23). An event becomes the
same finding as the kernel line would (the Xid catalog's rule for that code, or
the documented default for codes newer than the catalog), so the node is marked
once whichever source is first: marking is idempotent.

Codes whose action depends on the driver's text are left to the kernel log, since
an event carries only the number: Xid 154 (the text names the recovery action)
and the NVLink5 Xids 144-150 (the text says Fatal or Nonfatal).
"""

from __future__ import annotations

import logging

from node_agent.findings import Finding
from node_agent.gpu import ToolUnavailable
from node_agent.rules import RULES, rule

log = logging.getLogger("node_agent.nvml_events")

TEXT_DEPENDENT_XIDS = frozenset({154, *range(144, 151)})


def xid_event_finding(code: int, bus_id: str) -> Finding | None:
    """The finding for an NVML Xid event; None for codes only the kernel line can classify."""
    if code in TEXT_DEPENDENT_XIDS:
        return None
    r = RULES.get(f"xid-{code}") or rule("xid-unlisted")
    return r.finding(f"NVML event: Xid {code} on GPU {bus_id} (nvmlEventTypeXidCriticalError)", device=bus_id,
                     code=str(code))


class NvmlEventWatcher:
    """Registers every GPU for Xid and double-bit ECC events and turns what arrives into findings."""

    def __init__(self, nvml=None) -> None:
        """``nvml``: the pynvml module (default); tests pass a stand-in answering as libnvidia-ml would."""
        if nvml is None:
            import pynvml as nvml
        self.nvml = n = nvml
        try:
            n.nvmlInit()
            self.event_set = n.nvmlEventSetCreate()
        except n.NVMLError as e:
            raise ToolUnavailable(f"NVML events unavailable: {e}") from None
        want = n.nvmlEventTypeXidCriticalError | n.nvmlEventTypeDoubleBitEccError
        self.registered = 0
        for i in range(n.nvmlDeviceGetCount()):
            try:
                h = n.nvmlDeviceGetHandleByIndex(i)
                mask = want & n.nvmlDeviceGetSupportedEventTypes(h)
                if mask:
                    n.nvmlDeviceRegisterEvents(h, mask, self.event_set)
                    self.registered += 1
            except n.NVMLError as e:  # a lost GPU: the polled gpu-lost rule reports it
                log.warning("GPU %d: no NVML events (%s)", i, e)

    def _bus_id(self, handle) -> str:
        try:
            bus = self.nvml.nvmlDeviceGetPciInfo(handle).busId
            return bus.decode() if isinstance(bus, bytes) else str(bus)
        except self.nvml.NVMLError:
            return ""

    def wait(self, timeout_ms: int) -> list[Finding]:
        """Block up to ``timeout_ms`` for one event; [] on timeout or an event that needs no finding."""
        n = self.nvml
        try:
            data = n.nvmlEventSetWait_v2(self.event_set, timeout_ms)
        except n.NVMLError as e:
            if e.value == n.NVML_ERROR_TIMEOUT:
                return []
            raise
        bus = self._bus_id(data.device)
        if data.eventType & n.nvmlEventTypeXidCriticalError:
            f = xid_event_finding(int(data.eventData), bus)
            return [f] if f else []
        if data.eventType & n.nvmlEventTypeDoubleBitEccError:
            return [rule("gpu-dbe").finding(f"NVML event: uncorrectable (double-bit) ECC error on GPU {bus} "
                                            "(nvmlEventTypeDoubleBitEccError)", bus)]
        return []

    def close(self) -> None:
        try:
            self.nvml.nvmlEventSetFree(self.event_set)
        except self.nvml.NVMLError:
            pass
