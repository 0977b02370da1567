"""What NCCL's error handling must be for each restart mode, set in the environment the launcher hands its workers.

``TORCH_NCCL_ASYNC_ERROR_HANDLING`` (facts: torch.nccl-async-error-handling) decides what ProcessGroupNCCL's
watchdog does when a collective fails or times out: 1 (TearDown, the training image's default) aborts the
communicators and takes the process down. That is right for ``--restart process``: torchrun restarts every worker
of the node anyway. With ``--restart in-process`` the survivors of a lost peer must live: the launcher's hang
watch and the worker's abort (``training/ft/inprocess.py``: ``dist.distributed_c10d._abort_process_group()``,
which torch says to use with the variable set to 0) release them, and they re-form the process group in their own
processes. There the workers get 0 (NoHandling) whatever the image or the user set.
"""

from __future__ import annotations

VAR = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
LEGACY_VAR = "NCCL_ASYNC_ERROR_HANDLING"  # the older name torch still reads (ProcessGroupNCCL.hpp:67-69)
IN_PROCESS = "0"  # NoHandling: the watchdog reports, our abort acts (ProcessGroupNCCL.hpp:160-171)


def worker_env(env: dict[str, str], restart: str) -> dict[str, str]:
    """``env`` for the workers of a launch with ``--restart restart``."""
    if restart != "in-process":
        return env
    out = {k: v for k, v in env.items() if k != LEGACY_VAR}
    out[VAR] = IN_PROCESS
    return out
