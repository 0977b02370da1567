"""A stand-in for libnvidia-ml.so.1 at its C ABI, under the real nvidia-ml-py (13.615.71).

The real ``pynvml`` module runs unchanged: its wrappers build the ctypes arguments, call a function pointer
and turn the answer into Python (structures, ``convertStrBytes``' bytes-to-str, ``NVMLError`` from the return
code). Only the pointers are ours: ``pynvml.nvmlLib`` is the object ``_nvmlGetFunctionPointer`` reads each
symbol from (pynvml.py:917 ``nvmlLib = None``, :1121-1138 ``getattr(nvmlLib, name)``, cached in
``_nvmlGetFunctionPointer_cache``; ``_LoadNvmlLibrary`` :3165-3197 loads ``CDLL("libnvidia-ml.so.1")`` only while
it is None), and each symbol is a ``ctypes.CFUNCTYPE`` with the C prototype of the NVML API reference
(https://docs.nvidia.com/deploy/nvml-api/, checked 2026-11-25), so ctypes marshals every argument as for the real
library: a structure passed where a pointer is due fails here as it would misbehave there.

Symbols (and the pynvml.py lines that call them): nvmlInitWithFlags :3144, nvmlShutdown :3199,
nvmlDeviceGetCount_v2 :3372, nvmlDeviceGetHandleByIndex_v2 :3379, nvmlDeviceGetUUID :3588 (``char*``, length),
nvmlDeviceGetPciInfo_v3 :3664 (``nvmlPciInfo_t*``), nvmlDeviceGetTotalEccErrors :4050,
nvmlDeviceGetRemappedRows :6300, nvmlDeviceGetCurrentClocksEventReasons :4672, nvmlDeviceGetCurrPcieLinkWidth
:4625, nvmlDeviceGetMaxPcieLinkWidth :4633, nvmlDeviceGetNvLinkState :4965, nvmlDeviceGetNvLinkErrorCounter
:4938, nvmlDeviceGetGpuFabricInfo :7321 (``nvmlGpuFabricInfo_t*``: the caller passes ``byref``), the event set
calls :4529-4597. A symbol not listed is absent, as from an older driver (pynvml raises
NVML_ERROR_FUNCTION_NOT_FOUND).
"""

from __future__ import annotations

import contextlib
import ctypes
from ctypes import CFUNCTYPE, POINTER, c_int, c_uint, c_ulonglong, c_void_p, cast
from types import SimpleNamespace

import pynvml as p

HANDLE0 = 0x7F00_0000  # device handle i is this address + i (an opaque nvmlDevice_t)
EVENT_SET = 0x7E00_0000
NVLINKS = 18  # H100 SXM: 18 NVLink4 links


def _out(ptr, ctype, value) -> None:
    cast(ptr, POINTER(ctype))[0] = value


class LibNvml:
    """What libnvidia-ml answers on a node of ``gpus`` GPUs (H100 SXM-like: PCIe x16, 18 NVLinks).

    ``lost``: indices whose handle answers NVML_ERROR_GPU_IS_LOST; ``fabric_error``: indices whose fabric probe
    completed with NVML_ERROR_UNKNOWN; ``thermal``: indices with HW thermal slowdown among their clock event
    reasons; ``events``: (gpu index, event type, event data) the driver will deliver, in order;
    ``fabric_clique``: (16-byte cluster UUID, clique id) every GPU's fabric probe reports (a GB200 NVL72 rack's
    NVLink domain), all zero by default as on a GPU outside a multi-node NVLink domain.
    """

    def __init__(self, gpus=8, lost=(), fabric_error=(), thermal=(), events=(), fabric_clique=(bytes(16), 0)):
        self.gpus, self.lost, self.fabric_error, self.thermal = gpus, set(lost), set(fabric_error), set(thermal)
        self.fabric_clique = fabric_clique
        self.events, self.registered, self.calls = list(events), {}, []
        P, U, L = c_void_p, c_uint, c_ulonglong
        protos = {  # symbol: argument types (every function returns nvmlReturn_t, an int)
            "nvmlInitWithFlags": (U,), "nvmlShutdown": (),
            "nvmlDeviceGetCount_v2": (P,), "nvmlDeviceGetHandleByIndex_v2": (U, P),
            "nvmlDeviceGetUUID": (P, P, U), "nvmlDeviceGetPciInfo_v3": (P, P),
            "nvmlDeviceGetTotalEccErrors": (P, U, U, P), "nvmlDeviceGetRemappedRows": (P, P, P, P, P),
            "nvmlDeviceGetCurrentClocksEventReasons": (P, P), "nvmlDeviceGetCurrPcieLinkWidth": (P, P),
            "nvmlDeviceGetMaxPcieLinkWidth": (P, P), "nvmlDeviceGetNvLinkState": (P, U, P),
            "nvmlDeviceGetNvLinkErrorCounter": (P, U, U, P), "nvmlDeviceGetGpuFabricInfo": (P, P),
            "nvmlEventSetCreate": (P,), "nvmlDeviceGetSupportedEventTypes": (P, P),
            "nvmlDeviceRegisterEvents": (P, L, P), "nvmlEventSetWait_v2": (P, P, U), "nvmlEventSetFree": (P,),
        }
        # keep the CFUNCTYPE objects alive as long as the library object
        self.symbols = {name: CFUNCTYPE(c_int, *args)(self._entry(name)) for name, args in protos.items()}

    def _entry(self, name):
        impl = getattr(self, name)

        def call(*args):
            self.calls.append(name)
            try:
                return impl(*args)
            except Exception:  # a Python error must not unwind through C: answer as a broken library would
                return p.NVML_ERROR_UNKNOWN
        return call

    def _gpu(self, handle):
        """The GPU index of a handle; None for a handle this library never gave out."""
        i = (handle or 0) - HANDLE0
        return i if 0 <= i < self.gpus and i not in self.lost else None

    # --- the C functions
    def nvmlInitWithFlags(self, flags):
        return p.NVML_SUCCESS

    def nvmlShutdown(self):
        return p.NVML_SUCCESS

    def nvmlDeviceGetCount_v2(self, count):
        _out(count, c_uint, self.gpus)
        return p.NVML_SUCCESS

    def nvmlDeviceGetHandleByIndex_v2(self, index, device):
        if index >= self.gpus:
            return p.NVML_ERROR_INVALID_ARGUMENT
        if index in self.lost:
            return p.NVML_ERROR_GPU_IS_LOST
        _out(device, c_void_p, HANDLE0 + index)
        return p.NVML_SUCCESS

    def nvmlDeviceGetUUID(self, device, buf, length):
        i = self._gpu(device)
        if i is None:
            return p.NVML_ERROR_INVALID_ARGUMENT
        uuid = f"GPU-{i:08x}-0000-0000-0000-000000000000".encode() + b"\0"
        if length < len(uuid):
            return p.NVML_ERROR_INSUFFICIENT_SIZE
        ctypes.memmove(buf, uuid, len(uuid))
        return p.NVML_SUCCESS

    def nvmlDeviceGetPciInfo_v3(self, device, info):
        i = self._gpu(device)
        if i is None:
            return p.NVML_ERROR_INVALID_ARGUMENT
        pci = cast(info, POINTER(p.nvmlPciInfo_t)).contents
        bus_id = f"00000000:{0x18 + i:02X}:00.0".encode()
        pci.busIdLegacy, pci.busId, pci.domain, pci.bus, pci.device = bus_id, bus_id, 0, 0x18 + i, 0
        pci.pciDeviceId = 0x233010DE  # H100 SXM5 80GB
        return p.NVML_SUCCESS

    def nvmlDeviceGetTotalEccErrors(self, device, error_type, counter_type, count):
        if self._gpu(device) is None:
            return p.NVML_ERROR_INVALID_ARGUMENT
        _out(count, c_ulonglong, 0)
        return p.NVML_SUCCESS

    def nvmlDeviceGetRemappedRows(self, device, corr, unc, pending, failure):
        if self._gpu(device) is None:
            return p.NVML_ERROR_INVALID_ARGUMENT
        for ptr in (corr, unc, pending, failure):
            _out(ptr, c_uint, 0)
        return p.NVML_SUCCESS

    def nvmlDeviceGetCurrentClocksEventReasons(self, device, reasons):
        i = self._gpu(device)
        if i is None:
            return p.NVML_ERROR_INVALID_ARGUMENT
        bits = p.nvmlClocksEventReasonGpuIdle
        if i in self.thermal:
            bits |= p.nvmlClocksEventReasonHwSlowdown | p.nvmlClocksEventReasonHwThermalSlowdown
        _out(reasons, c_ulonglong, bits)
        return p.NVML_SUCCESS

    def nvmlDeviceGetCurrPcieLinkWidth(self, device, width):
        return self.nvmlDeviceGetMaxPcieLinkWidth(device, width)

    def nvmlDeviceGetMaxPcieLinkWidth(self, device, width):
        if self._gpu(device) is None:
            return p.NVML_ERROR_INVALID_ARGUMENT
        _out(width, c_uint, 16)
        return p.NVML_SUCCESS

    def nvmlDeviceGetNvLinkState(self, device, link, active):
        if self._gpu(device) is None or link >= NVLINKS:
            return p.NVML_ERROR_INVALID_ARGUMENT
        _out(active, c_uint, p.NVML_FEATURE_ENABLED)
        return p.NVML_SUCCESS

    def nvmlDeviceGetNvLinkErrorCounter(self, device, link, counter, value):
        if self._gpu(device) is None or link >= NVLINKS:
            return p.NVML_ERROR_INVALID_ARGUMENT
        _out(value, c_ulonglong, 0)
        return p.NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfo(self, device, info):
        i = self._gpu(device)
        if i is None:
            return p.NVML_ERROR_INVALID_ARGUMENT
        f = cast(info, POINTER(p.c_nvmlGpuFabricInfo_t)).contents
        f.state = p.NVML_GPU_FABRIC_STATE_COMPLETED
        f.status = p.NVML_ERROR_UNKNOWN if i in self.fabric_error else p.NVML_SUCCESS
        f.clusterUuid[:] = list(self.fabric_clique[0])
        f.cliqueId = self.fabric_clique[1]
        return p.NVML_SUCCESS

    def nvmlEventSetCreate(self, event_set):
        _out(event_set, c_void_p, EVENT_SET)
        return p.NVML_SUCCESS

    def nvmlDeviceGetSupportedEventTypes(self, device, types):
        if self._gpu(device) is None:
            return p.NVML_ERROR_INVALID_ARGUMENT
        _out(types, c_ulonglong, p.nvmlEventTypeAll)
        return p.NVML_SUCCESS

    def nvmlDeviceRegisterEvents(self, device, mask, event_set):
        i = self._gpu(device)
        if i is None or event_set != EVENT_SET:
            return p.NVML_ERROR_INVALID_ARGUMENT
        self.registered[i] = mask
        return p.NVML_SUCCESS

    def nvmlEventSetWait_v2(self, event_set, data, timeout_ms):
        if event_set != EVENT_SET:
            return p.NVML_ERROR_INVALID_ARGUMENT
        if not self.events:
            return p.NVML_ERROR_TIMEOUT
        i, kind, value = self.events.pop(0)
        d = cast(data, POINTER(p.c_nvmlEventData_t)).contents
        d.device = cast(c_void_p(HANDLE0 + i), p.c_nvmlDevice_t)
        d.eventType, d.eventData, d.gpuInstanceId, d.computeInstanceId = kind, value, 0xFFFFFFFF, 0xFFFFFFFF
        return p.NVML_SUCCESS

    def nvmlEventSetFree(self, event_set):
        return p.NVML_SUCCESS if event_set == EVENT_SET else p.NVML_ERROR_INVALID_ARGUMENT


@contextlib.contextmanager
def loaded(lib: LibNvml):
    """The real ``pynvml`` module with ``lib`` as its loaded libnvidia-ml (restored afterwards)."""
    saved = p.nvmlLib, dict(p._nvmlGetFunctionPointer_cache), p._nvmlLib_refcount
    p.nvmlLib = SimpleNamespace(**lib.symbols)
    p._nvmlGetFunctionPointer_cache.clear()
    try:
        yield p
    finally:
        p.nvmlLib, p._nvmlLib_refcount = saved[0], saved[2]
        p._nvmlGetFunctionPointer_cache.clear()
        p._nvmlGetFunctionPointer_cache.update(saved[1])
