"""The spec's ``queueing:`` section: cluster-wide Kueue scheduling settings.

``fair_sharing`` picks Kueue's preemption algorithm: with fair sharing on, Kueue runs fair
preemption, where ``borrowWithinCohort`` is never consulted and the teams' ``fair_sharing_weight``
decide who keeps borrowed capacity; off, Kueue's classical preemption applies ``borrowWithinCohort``
and ignores weights (kueue@v0.19.2 ``pkg/scheduler/preemption/preemption.go:155-160``).

``wait_for_pods_ready`` becomes Kueue's ``waitForPodsReady``: an admitted gang whose pods are not all
Ready in time is evicted, its quota released, and requeued after a backoff
(kueue@v0.19.2 ``apis/config/v1beta2/configuration_types.go:302-329, 402-440``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class WaitForPodsReadySpec(BaseModel):
    """Kueue's ``waitForPodsReady``, sized for multi-node accelerator gangs.

    The defaults leave room for what a large gang waits on before all its pods are Ready: pulling
    a multi-GiB training image on every node and, after a node failure, the Auto Scaling group's
    replacement passing its deep health check.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_minutes: int = Field(
        20, ge=1, le=24 * 60,
        description="an admitted job whose pods are not all Ready within this is evicted, its quota released, "
                    "and requeued")
    recovery_timeout_minutes: int = Field(
        30, ge=0, le=24 * 60,
        description="a running job that lost a pod (PodsReady=false) and has not recovered within this is "
                    "evicted and requeued; 0 = never")
    backoff_base_seconds: int = Field(
        120, ge=1, le=3600, description="first requeue delay after such an eviction; doubles on each retry")
    backoff_max_seconds: int = Field(3600, ge=1, le=86400, description="longest requeue delay")
    backoff_limit_count: int | None = Field(
        None, ge=0, description="evictions after which the job is deactivated; unset = requeue forever")

    @model_validator(mode="after")
    def _base_below_max(self) -> "WaitForPodsReadySpec":
        if self.backoff_base_seconds > self.backoff_max_seconds:
            raise ValueError(f"backoff_base_seconds {self.backoff_base_seconds} exceeds backoff_max_seconds "
                             f"{self.backoff_max_seconds}")
        return self


class QueueingSpec(BaseModel):
    """Cluster-wide Kueue scheduling: fair sharing or classical preemption, and gang readiness."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fair_sharing: bool = Field(
        True, description="share idle capacity by teams' fair_sharing_weight (Kueue fair preemption); "
                          "false = classical preemption, where teams' borrow_within_cohort applies")
    wait_for_pods_ready: WaitForPodsReadySpec = WaitForPodsReadySpec()
