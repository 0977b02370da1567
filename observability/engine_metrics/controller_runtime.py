"""The metric families controller-runtime registers in the registry Kueue's and JobSet's managers serve on their
metrics endpoint (scrape jobs kueue and jobset): Kueue v0.19.2 pins controller-runtime v0.24.1 and JobSet v0.12.0
pins v0.24.0 (their go.mod at the tags); the metric files are the same at both (``git diff v0.24.0 v0.24.1``
touches only pkg/client), so each row cites v0.24.1, the ``Name:`` line of its family, registered by the
package's ``init``. Rules read them with ``job=~"kueue|jobset"``. Not rows: the Go runtime and process collectors
registered beside them (pkg/internal/controller/metrics/metrics.go:104-107, go_* and process_*), whose families
are the Go toolchain's and client_golang's, not controller-runtime's; no rule or dashboard reads them."""

from __future__ import annotations

from observability.engine_metrics.model import EngineMetric

ENGINE = "controller-runtime v0.24.1 (Kueue, JobSet)"
REPO = "kubernetes-sigs/controller-runtime@v0.24.1"
CTRL = f"{REPO}:pkg/internal/controller/metrics/metrics.go"
QUEUE = f"{REPO}:pkg/internal/metrics/workqueue.go"
WEBHOOK = f"{REPO}:pkg/webhook/internal/metrics/metrics.go"

_ERRORS = ("OpenpodPlatformControllerReconcileErrors",)
_QUEUE = ("OpenpodPlatformControllerQueueBackedUp",)
_LEADER = ("OpenpodPlatformControllerLeaderless",)
_IN_ERRORS = ("also counted in controller_runtime_reconcile_errors_total (internal/controller/controller.go:484-490), "
              "which the error alert reads")
_SLOW = "a slow or busy controller shows as its work queue not draining (OpenpodPlatformControllerQueueBackedUp)"
_WEBHOOK = ("the admission webhooks' traffic; a webhook that fails or is down refuses the team's JobSets and "
            "Workloads at the API server, which answers the user")


def _c(path: str, name: str, typ: str, line: int, alerts: tuple[str, ...] = (), unused: str = "") -> EngineMetric:
    return EngineMetric(ENGINE, name, typ, f"{path}:{line}", alerts, bool(alerts), unused)   # alerted: on a dashboard


ROWS: tuple[EngineMetric, ...] = (
    _c(CTRL, "controller_runtime_reconcile_total", "counter", 33, _ERRORS),
    _c(CTRL, "controller_runtime_reconcile_errors_total", "counter", 40, _ERRORS),
    _c(CTRL, "controller_runtime_terminal_reconcile_errors_total", "counter", 47, unused=_IN_ERRORS),
    _c(CTRL, "controller_runtime_reconcile_panics_total", "counter", 54,
       unused=f"a recovered panic is returned as an error and {_IN_ERRORS}"),
    _c(CTRL, "controller_runtime_reconcile_time_seconds", "histogram", 61, unused=_SLOW),
    _c(CTRL, "controller_runtime_max_concurrent_reconciles", "gauge", 73,
       unused="configuration (Kueue's groupKindConcurrency, infra/governance/install.py), no state"),
    _c(CTRL, "controller_runtime_active_workers", "gauge", 80, unused=_SLOW),
    _c(CTRL, "controller_runtime_reconcile_timeouts_total", "counter", 89,
       unused="only with a ReconciliationTimeout set; a timed-out reconcile returns an error, counted in "
       "controller_runtime_reconcile_errors_total"),
    _c(QUEUE, "workqueue_depth", "gauge", 49, _QUEUE),
    _c(QUEUE, "workqueue_adds_total", "counter", 55, unused="traffic; a queue adds outrun shows as its depth"),
    _c(QUEUE, "workqueue_queue_duration_seconds", "histogram", 61, unused=_SLOW),
    _c(QUEUE, "workqueue_work_duration_seconds", "histogram", 71, unused=_SLOW),
    _c(QUEUE, "workqueue_unfinished_work_seconds", "gauge", 81,
       unused="the sum over in-flight items; the longest one is read (workqueue_longest_running_processor_seconds)"),
    _c(QUEUE, "workqueue_longest_running_processor_seconds", "gauge", 90, _QUEUE),
    _c(QUEUE, "workqueue_retries_total", "counter", 97,
       unused="counts every delayed add, RequeueAfter included (its Help, workqueue.go:98): Kueue and JobSet "
       "requeue by design; failed reconciles are read from controller_runtime_reconcile_errors_total"),
    _c(f"{REPO}:pkg/metrics/client_go_adapter.go", "rest_client_requests_total", "counter", 35,
       unused="API requests by code; an API server that refuses the controller shows as its reconcile errors"),
    _c(f"{REPO}:pkg/metrics/leaderelection.go", "leader_election_master_status", "gauge", 14, _LEADER),
    _c(f"{REPO}:pkg/metrics/leaderelection.go", "leader_election_slowpath_total", "counter", 19,
       unused="declared but never registered (init registers leaderGauge only, leaderelection.go:24-25): not served"),
    _c(f"{REPO}:pkg/certwatcher/metrics/metrics.go", "certwatcher_read_certificate_total", "counter", 29,
       unused="certificate reloads, no fault by itself"),
    _c(f"{REPO}:pkg/certwatcher/metrics/metrics.go", "certwatcher_read_certificate_errors_total", "counter", 36,
       unused="a serving certificate that cannot be read fails the metrics scrape or the webhooks "
       "(OpenpodScrapeTargetDown)"),
    _c(WEBHOOK, "controller_runtime_webhook_latency_seconds", "histogram", 34, unused=_WEBHOOK),
    _c(WEBHOOK, "controller_runtime_webhook_requests_total", "counter", 48, unused=_WEBHOOK),
    _c(WEBHOOK, "controller_runtime_webhook_requests_in_flight", "gauge", 59, unused=_WEBHOOK),
    _c(f"{REPO}:pkg/webhook/admission/metrics/metrics.go", "controller_runtime_webhook_panics_total", "counter", 28,
       unused=_WEBHOOK),
    _c(f"{REPO}:pkg/webhook/conversion/metrics/metrics.go", "controller_runtime_conversion_webhook_panics_total",
       "counter", 28, unused=_WEBHOOK),
)
