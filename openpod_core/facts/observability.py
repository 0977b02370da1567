"""Observability: the AMP managed scraper, the exporters' charts and metric names, Kueue's metrics
endpoint, HyperPod's DCGM level (``platform_constructs/observability.py``, ``observability/``)."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "grafana.amp-datasource-plugin", "Amazon Managed Grafana offers the Amazon Managed Service for Prometheus "
        "data source (plugin grafana-amazonprometheus-datasource) from workspace version 12; SigV4 on the core "
        "prometheus data source is deprecated for AMP (Grafana 13 migrates such data sources to the plugin)",
        "https://docs.aws.amazon.com/grafana/latest/userguide/amazon-prometheus-data-source.html; "
        "https://grafana.com/grafana/plugins/grafana-amazonprometheus-datasource/; "
        "https://grafana.com/docs/grafana/v13.1/datasources/prometheus/configure/aws-authentication/",
        "2026-11-28", "observability/dashboards.py DATASOURCE_TYPE: the datasource variable's type and every panel's",
    ),
    Fact(
        "grafana.amg-versions", "Amazon Managed Grafana workspaces run Grafana 9, 10, 12 or 13 (the user guide has "
        "a 'Working in Grafana version' section for each); a workspace can be updated to a newer version only",
        "https://docs.aws.amazon.com/grafana/latest/userguide/using-grafana-v13.html; "
        "https://docs.aws.amazon.com/grafana/latest/userguide/AMG-workspace-version-update.html", "2026-11-28",
        "platform_constructs/observability.py pins GRAFANA_VERSION 12.4 (the first line with the AMP data source); "
        "the exact string is fact grafana.amg-version-12.4",
    ),
    Fact(
        "grafana.amg-version-12.4", "\"12.4\" is the GrafanaVersion of Amazon Managed Grafana's Grafana 12 line "
        "(after 8.4, 9.4 and 10.4); CreateWorkspace takes it (in April 2026 a workspace created without it still "
        "got 10.4)",
        "https://github.com/aws/amazon-managed-grafana-roadmap/issues/103 (AWS's roadmap repository, 2026-04-22: "
        "\"Default version is still v10.4, not the new v12.4\"); aws/amazon-managed-grafana-roadmap#94 (the "
        "service team: v12 ships directly, v11 skipped); "
        "https://aws.amazon.com/about-aws/whats-new/2024/05/amazon-managed-grafana-supports-version-10-4 (the "
        "X.4 naming)", "2026-11-29",
        "platform_constructs/observability.py GRAFANA_VERSION; public Terraform configurations pin "
        "grafana_version = \"12.4\" and note that \"11.0\" fails CreateWorkspace (found by text search). No AWS "
        "page lists the string itself (botocore's grafana model has GrafanaVersion as a free string, 1-255 "
        "characters); `aws grafana list-versions` is the live list",
    ),
    Fact(
        "fsx.cloudwatch.free-data-storage-capacity", "FSx for Lustre publishes FreeDataStorageCapacity (bytes) in "
        "the AWS/FSx namespace with the dimension FileSystemId; the Sum statistic is the free bytes over all "
        "storage targets (OSTs), Minimum those of the fullest one",
        "https://docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html (storage capacity metrics)",
        "2026-11-28", "platform_constructs/observability.py alarm_on_lustre alarms on the Sum under the spec's "
        "observability.alerts.fsx_free_percent of the file system's capacity; the statistics' meanings as in the "
        "guide's other per-OST metrics and the File Cache guide's utilization-metrics page",
    ),
    Fact(
        "amp.scraper.prerequisites", "subnets in at least two AZs (the cluster's), the cluster security group, "
        "a cluster endpoint with private access, DNS in the VPC",
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html", "2026-11-23",
        "platform_constructs/observability.py checks the AZs; the cluster endpoint is always private",
    ),
    Fact(
        "amp.scraper.customer-managed-key", "workspaces created with a customer managed key cannot use AWS "
        "managed collectors for ingestion",
        "https://docs.aws.amazon.com/de_de/prometheus/latest/userguide/AMP-collector-how-to.html", "2026-11-23",
        "read in AWS's German translation of the page; the spec refuses kms_key_arn with collector: managed-scraper",
    ),
    Fact(
        "amp.scraper.configuration-blob", "AWS::APS::Scraper ScrapeConfiguration.ConfigurationBlob is the base64 "
        "encoded Prometheus scrape configuration",
        "https://docs.aws.amazon.com/de_de/AWSCloudFormation/latest/UserGuide/aws-properties-aps-scraper-scrapeconfiguration.html",
        "2026-11-23", "the construct wraps the YAML in Fn::Base64; cfn-lint's provider schema says the same",
    ),
    Fact(
        "amp.cloudwatch.usage-metrics", "AMP vends usage metrics to CloudWatch at no charge, in the AWS/Usage and "
        "AWS/Prometheus namespaces; those in AWS/Usage are the metric ResourceCount, one per resource name and "
        "workspace (the table opens with the alert manager and query API rates: CreateAlertManagerAlertsTPS ... "
        "GetSeriesTPS, InhibitionRulesInAlertManagerDefinition)",
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-CW-usage-metrics.html", "2026-11-29",
        "only the page's opening rows could be read here (stored copies, English, Chinese and Japanese): the rows "
        "for active series, ingestion rate and discarded samples were not; the dimensions are fact "
        "amp.cloudwatch.usage-dimensions (UNVERIFIED: AMP discarded samples)",
    ),
    Fact(
        "amp.cloudwatch.usage-dimensions", "a workspace's active series and ingestion rate are AWS/Usage "
        "ResourceCount with the dimensions Type Resource, ResourceId <workspace ID>, Resource ActiveSeries (or "
        "IngestionRate), Service Prometheus, Class None",
        "aws-observability/terraform-aws-observability-accelerator@v2.13.1:"
        "modules/managed-prometheus-monitoring/alarms.tf:14-25,44-55 (variables.tf:6-21: the workspace ID, "
        "thresholds 8,000,000 series and 136,000)", "2026-11-29",
        "AWS's own observability accelerator alarms on exactly these; a CloudWatch alarm matches a metric only "
        "with all its dimensions. platform_constructs/observability.py alarm_on_usage (ResourceId: the "
        "workspace's WorkspaceId attribute); the rate is taken as samples per second like the quota (the "
        "accelerator's 136,000 default is 80% of 170,000)",
    ),
    Fact(
        "amp.cloudwatch.usage-resources", "AMP's usage metrics in the AWS/Usage namespace include ActiveSeries and "
        "IngestionRate, to follow a workspace's use against its quotas (an alarm on ActiveSeries before the "
        "automatic adjustment ends; metric math on IngestionRate for spikes)",
        "https://aws.amazon.com/blogs/mt/automating-metrics-collection-on-amazon-eks-with-amazon-managed-service-"
        "for-prometheus-managed-scrapers/ (AWS Cloud Operations blog, 2024-09-18, section Amazon CloudWatch Usage "
        "metrics)", "2026-11-29",
        "a blog, not the reference page: it names the two as the console lists them, without the dimensions "
        "(fact amp.cloudwatch.usage-dimensions)",
    ),
    Fact(
        "cloudwatch.usage-metrics.dimensions", "metrics in AWS/Usage (CallCount, ResourceCount, ThrottleCount) "
        "carry the dimensions Service, Type, Resource and Class; the page gives their values for CloudWatch's own "
        "API usage only (Service CloudWatch, Type API, Class None)",
        "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Usage-Metrics.html",
        "2026-11-29", "the values AMP uses (Service, Type, Class) and any per-workspace dimension are not on it",
    ),
    Fact(
        "amp.quotas.active-series", "Active series per workspace: default 50,000,000, adjustable up to one "
        "billion; a series is active if a sample was reported in the past 2 hours; capacity from 2M to 50M is "
        "adjusted automatically on the last 30 minutes of usage. AMP's quotas are per workspace unless noted, and "
        "the page names active series and ingestion rate per workspace as the ones to monitor (with CloudWatch "
        "usage-metric alarms)",
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP_quotas.html", "2026-11-29",
        "the newest of the stored copies read; older copies say 10,000,000 per 2 hours (2M to 10M adjusted) and, "
        "earlier, 2,000,000 with an Ingestion burst size per workspace beside the rate",
    ),
    Fact(
        "amp.quotas.ingestion-throttling", "Ingestion rate per workspace limits how fast a workspace accepts "
        "samples; past it, or past the active series quota, remote write is answered HTTP 429 (\"ingestion rate "
        "limit (...) exceeded\", \"per-user series limit ... exceeded\") and those samples are not ingested",
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP_quotas.html (Ingestion throttling); "
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-troubleshooting.html (429 or limit exceeded "
        "errors)", "2026-11-29",
        "the current default rate was not in the part of the quota page read here; an older copy lists 140,000 "
        "samples per second (burst 1,000,000), the spec's default observability.alerts.amp_ingestion_rate_quota",
    ),
    Fact(
        "amp.quotas.active-series.resource-level", "Service Quotas lists Active series per workspace as a "
        "resource-level quota: the console shows each workspace's utilization against it and takes increase "
        "requests per workspace",
        "https://docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html (Check "
        "Amazon Managed Service for Prometheus throttling)", "2026-11-29",
        "read in a stored Markdown copy of the page; whether SERVICE_QUOTA() in CloudWatch metric math covers a "
        "resource-level quota was not found, so the alarms take the quota from the spec "
        "(observability.alerts.amp_active_series_quota, amp_ingestion_rate_quota)",
    ),
    Fact(
        "amp.workspace.retention", "AWS::APS::Workspace WorkspaceConfiguration.RetentionPeriodInDays (integer >= 1)",
        "aws-cloudformation/cfn-lint@v1.58.0:src/cfnlint/data/schemas/providers/us-east-1.json (AWS::APS::Workspace)",
        "2026-11-23", "the spec allows 1..1095 days",
    ),
    Fact(
        "chart.prometheus-node-exporter", "4.56.1 (node_exporter 1.12.1); values service.port 9100, podAnnotations, "
        "tolerations (default: NoSchedule only)",
        "prometheus-community/helm-charts@prometheus-node-exporter-4.56.1:charts/prometheus-node-exporter/values.yaml:131,429,471",
        "2026-11-23", "the platform tolerates every taint so nodes in their startup health check are watched too",
    ),
    Fact(
        "node-exporter.infiniband-efa", "node_exporter 1.12.1's infiniband collector exports for an EFA device only "
        "node_infiniband_info, state_id, physical_state_id, rate_bytes_per_second and lifespan_seconds: none of "
        "the efa driver's hw_counters (tx_bytes, rx_bytes, rx_drops, rdma_read_bytes, ...)",
        "prometheus/node_exporter@v1.12.1:collector/infiniband_linux.go:44,184-255 (go.mod: procfs v0.21.1); "
        "prometheus/procfs@v0.21.1:sysfs/class_infiniband.go:71-103,294-312 (hw_counters parsed by a fixed list "
        "of names); torvalds/linux drivers/infiniband/hw/efa/efa_verbs.c EFA_DEFINE_PORT_STATS (the efa names)",
        "2026-11-23",
        "so the node agent exports them (openpod_node_agent_efa_counter{device,counter}); procfs's "
        "class_amazon_efa.go (commit 4b4cb05) is in no procfs tag and node_exporter has no EFA collector",
    ),
    Fact(
        "chart.kube-state-metrics", "8.4.0 (kube-state-metrics 2.20.0); values service.port 8080, nodeSelector, "
        "podAnnotations",
        "prometheus-community/helm-charts@kube-state-metrics-8.4.0:charts/kube-state-metrics/values.yaml:64,360,389",
        "2026-11-23", "prometheusScrape (line 2) annotates only the Service; the platform annotates the pod",
    ),
    Fact(
        "chart.dcgm-exporter", "4.8.2 (tag 4.5.3-4.8.2, repo https://nvidia.github.io/dcgm-exporter/helm-charts); "
        "values podAnnotations, service.port 9400, serviceMonitor.enabled true by default",
        "NVIDIA/dcgm-exporter@4.5.3-4.8.2:deployment/values.yaml:85,114,129 and README.md:38-39", "2026-11-23",
        "the platform turns the ServiceMonitor off (no Prometheus Operator CRDs) and annotates the pods",
    ),
    Fact(
        "dcgm.xid.last-value-held", "DCGM_FI_DEV_XID_ERRORS is written only when an Xid arrives (the NVML event "
        "thread or /dev/kmsg), never polled, and nothing writes it back on a GPU reset: the latest sample stays the "
        "last Xid until the host engine restarts (its cache is in memory), the watch is removed, or the GPU is lost "
        "or detached (a blank value, which dcgm-exporter skips)",
        "NVIDIA/DCGM@v4.5.3:dcgmlib/src/DcgmCacheManager.cpp:7400-7424 (RecordXidForGpu appends the Xid), "
        "7748-7754 (nvmlEventTypeXidCriticalError), 13210-13212 (the poll skips XID: 'handled by the NVML event "
        "thread'), 7111 and sdk/nvidia/nvml/common/timeseries.c:292-320 (old samples are trimmed only when a new one "
        "is appended, so the newest stays), 4966 (GetLatestSample reads the newest), 6633-6652 (ClearWatchInfo "
        "frees the series), 9583-9590 (a lost GPU gets a blank); NVIDIA/dcgm-exporter@4.5.3-4.8.2:internal/pkg/"
        "collector/gpu_collector.go:302-305,373-380 (blank values are not exported), deployment/values.yaml:24 "
        "(the chart's arguments: embedded host engine, no -r), 95-101 (unprivileged)", "2026-11-29",
        "dcgm-exporter 4.5.3-4.8.2 embeds DCGM 4.5.3 and the platform keeps the chart's arguments, so restarting "
        "the exporter pod on the node (or rebooting or replacing the node) is what clears a held Xid; "
        "OpenpodGPUXidError's text and runbook (observability/rules.py) say so: a GPU reset alone does not. A host "
        "engine that can open /dev/kmsg re-reads Xids 79, 119 and 120 from the kernel's ring buffer when it starts "
        "(DcgmKmsgReader.cpp:163,197: opened without a seek); the exporter pod mounts no /dev/kmsg",
    ),
    Fact(
        "neuron-monitor.image", "public.ecr.aws/neuron/neuron-monitor:1.3.0",
        "aws-neuron/aws-neuron-sdk@v2.32.0:src/k8/k8s-neuron-monitor-daemonset.yml:43-64", "2026-11-23",
        "AWS's manifest for the Neuron monitor DaemonSet: command /opt/bin/entrypoint.sh, args --port 8000 "
        "--neuron-monitor-config /opt/aws/neuron/bin/neuron-monitor.conf, privileged; the platform's copy is "
        "platform_constructs/neuron_monitor.py (its affinity: our Trainium label, not AWS's list without trn2)",
    ),
    Fact(
        "chart.neuron-helm-chart.monitor-template", "monitor.exporter.podAnnotations render as "
        "spec.template.metadata.tolerations",
        "aws-neuron/neuron-helm-charts@5c70d9d:charts/neuron-helm-chart/templates/monitor-exporter-daemonset.yaml:19-22",
        "2026-11-23",
        "so the chart's monitor pods cannot be annotated for the annotation-based scrape job; the platform "
        "deploys the DaemonSet itself (platform_constructs/neuron_monitor.py). The only stored version of the "
        "template; which chart release first ships it was not determined",
    ),
    Fact(
        "neuron-monitor.metric-names", "neuroncore_utilization_ratio{neuroncore}, neuron_runtime_memory_used_bytes"
        "{memory_location}, execution_status_total{status_type}, execution_errors_total{error_type}, "
        "hardware_ecc_events_total{event_type,neuron_device_index}",
        "aws-neuron/aws-neuron-sdk@v2.32.0:src/examples/neuron-monitor/neuron-monitor-grafana.json:524,580,1155 "
        "(AWS's dashboard for neuron-monitor-prometheus.py); aws/amazon-cloudwatch-agent@c95b4fc:translator/"
        "translate/otel/processor/metricstransformprocessor/translator.go (renameMapForNeuronMonitor)", "2026-11-23",
        "the Neuron Monitor user guide documents the JSON, not the exporter's names; execution_errors_total and "
        "hardware_ecc_events_total are read only in the CloudWatch agent, which consumes the exporter's endpoint; "
        "labels as in open-telemetry/opentelemetry-collector-contrib receiver/awscontainerinsightreceiver/internal/"
        "neuron tests' recorded output",
    ),
    Fact(
        "kueue.metrics.names", "kueue_pending_workloads{cluster_queue,status,replica_role}, "
        "kueue_admitted_workloads_total, kueue_admission_wait_time_seconds, kueue_cluster_queue_nominal_quota ...",
        "kubernetes-sigs/kueue@v0.19.2:pkg/metrics/metrics.go:411-420,526-549,866-874", "2026-11-23",
        "Subsystem kueue (pkg/constants/constants.go:24); the full list with lines is observability/metrics.py",
    ),
    Fact(
        "kube-state-metrics.pod-info-node", "kube_pod_info{namespace,pod,uid,host_ip,pod_ip,node,created_by_kind,"
        "created_by_name,priority_class,host_network} = 1, node = spec.nodeName; kube_pod_container_status_restarts_"
        "total carries namespace, pod, uid, container and no node",
        "kubernetes/kube-state-metrics@v2.20.0:internal/store/pod.go:41,441-456,642-662", "2026-11-29",
        "OpenpodPlatformPodCrashLooping joins the node on (namespace, pod, uid) (observability/platform_rules.py)",
    ),
    Fact(
        "kueue.local-queue.cluster-queue", "a LocalQueue's ClusterQueue is spec.clusterQueue, immutable (CEL "
        "self == oldSelf); Kueue's kueue_local_queue_* metrics are labelled name, namespace (and status, "
        "priority_class, replica_role, custom labels), never cluster_queue",
        "kubernetes-sigs/kueue@v0.19.2:apis/kueue/v1beta2/localqueue_types.go:33-37 and pkg/metrics/metrics.go:"
        "431,449,466", "2026-11-29",
        "so kube-state-metrics' custom resource state exports it (openpod_kueue_localqueue_info, an Info metric: "
        "kubernetes/kube-state-metrics@v2.20.0:docs/metrics/extend/customresourcestate-metrics.md:725-731, "
        "pkg/customresourcestate/registry_factory.go:319-382)",
    ),
    Fact(
        "kueue.metrics.cluster-queue-resources", "kueue_cluster_queue_resource_usage / _nominal_quota are reported "
        "only with Configuration metrics.enableClusterQueueResources: true",
        "kubernetes-sigs/kueue@v0.19.2:apis/config/v1beta2/configuration_types.go:182-185", "2026-11-23",
        "set in the platform's Kueue configuration (infra/governance/install.py)",
    ),
    Fact(
        "kueue.metrics.endpoint", "HTTPS on :8443, every scrape authenticated (TokenReview) and authorized "
        "(SubjectAccessReview on GET /metrics)",
        "kubernetes-sigs/kueue@v0.19.2:cmd/kueue/main.go:188-191 (SecureServing, WithAuthenticationAndAuthorization)",
        "2026-11-23", "the scrape job sends the scraper's token; the scraper's ClusterRole allows GET /metrics",
    ),
    Fact(
        "jobset.metrics.endpoint", "the JobSet controller serves /metrics on HTTPS :8443, every scrape authenticated "
        "(TokenReview) and authorized (SubjectAccessReview on GET /metrics), behind Service "
        "<release>-metrics-service (port https 8443) that the chart renders whatever prometheus.enable; with "
        "certManager off no certificate is mounted and controller-runtime serves a self-signed one; its own "
        "families are jobset_failed_total and jobset_completed_total",
        "kubernetes-sigs/jobset@v0.12.0:main.go:77,179-186; charts/jobset/templates/prometheus/"
        "manager_metrics_service.yaml:20-34, prometheus/_helpers.tpl:20-29, controller/deployment.yaml:72-76,84-86, "
        "rbac/auth_proxy_role.yaml (tokenreviews, subjectaccessreviews); pkg/metrics/metrics.go:27-61; "
        "kubernetes-sigs/controller-runtime pkg/metrics/server/server.go createListener (self-signed fallback; read "
        "at 00dad5677b26)", "2026-11-29",
        "observability/scrape.py's jobset job: the Service by name, the scraper's token, TLS unverified as for Kueue",
    ),
    Fact(
        "amp.scraper.access-entry", "the scraper's role ARN from describe-scraper "
        "(role/aws-service-role/scraper.aps.amazonaws.com/AWSServiceRoleForAmazonPrometheusScraper_<id>) rewritten "
        "to role/AWSServiceRoleForAmazonPrometheusScraper_<id>, mapped to Kubernetes user aps-collector-user",
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html "
        "(Configuring your Amazon EKS cluster, steps 1-5)", "2026-11-23",
        "platform_constructs/observability.py builds that ARN and the access entry with that user; the guide's "
        "ClusterRole also grants nodes/proxy and configmaps, which our scrape jobs do not use",
    ),
    Fact(
        "amp.scraper.authorization", "authorization, when used, must be type Bearer with credentials_file "
        "/var/run/secrets/kubernetes.io/serviceaccount/token; scrape interval >= 30 s; targets other than "
        "kubernetes.default.svc by IP",
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html "
        "(limitations specific to AWS managed collectors)", "2026-11-23",
        "observability/scrape.py uses exactly that form for Kueue's authenticated endpoint",
    ),
    Fact(
        "controller-runtime.pins", "Kueue v0.19.2 pins sigs.k8s.io/controller-runtime v0.24.1, JobSet v0.12.0 pins "
        "v0.24.0; between the two only pkg/client changes, so the metric files are the same",
        "kubernetes-sigs/kueue@v0.19.2:go.mod:47; kubernetes-sigs/jobset@v0.12.0:go.mod:24; "
        "kubernetes-sigs/controller-runtime@v0.24.1 (git diff --stat v0.24.0 v0.24.1 -- pkg/)", "2026-11-29",
        "observability/engine_metrics/controller_runtime.py cites v0.24.1 for both managers",
    ),
    Fact(
        "controller-runtime.reconcile-errors", "every reconcile that returns an error counts in "
        "controller_runtime_reconcile_errors_total and controller_runtime_reconcile_total{result=\"error\"} "
        "(terminal errors, recovered panics and timeouts included); every label set starts at 0 when the "
        "controller starts",
        "kubernetes-sigs/controller-runtime@v0.24.1:pkg/internal/controller/controller.go:195-204,449-458,484-490",
        "2026-11-29", "observability/platform_rules.py OpenpodPlatformControllerReconcileErrors",
    ),
    Fact(
        "client-go.leader-election-gauge", "leader_election_master_status is set to 0 when a leader elector is "
        "created and to 1 when it acquires the Lease: a standby reports 0, the leader 1",
        "kubernetes/client-go@v0.36.2:tools/leaderelection/leaderelection.go:112,271; "
        "kubernetes-sigs/controller-runtime@v0.24.1:pkg/metrics/leaderelection.go:13-16,24-26", "2026-11-29",
        "observability/platform_rules.py OpenpodPlatformControllerLeaderless (max over replicas == 0)",
    ),
    Fact(
        "kubernetes.workload-status", "DaemonSet status: currentNumberScheduled counts nodes running a daemon pod "
        "that should, numberUnavailable nodes that should and have none available; a Deployment past "
        "progressDeadlineSeconds (default 600 s) gets the Progressing condition with reason "
        "ProgressDeadlineExceeded",
        "kubernetes/api@v0.36.2:apps/v1/types.go:415-420,684-722", "2026-11-29",
        "observability/platform_rules.py OpenpodPlatformDaemonSetUnavailable, OpenpodPlatformDeploymentUnavailable",
    ),
    Fact(
        "dcgm-exporter.custom-metrics", "the chart's customMetrics value replaces its whole counters list (CSV: "
        "field, type, help); DCGM_FI_DEV_PCIE_LINK_GEN (237) and DCGM_FI_DEV_PCIE_LINK_WIDTH (238) are DCGM fields "
        "go-dcgm resolves by name",
        "NVIDIA/dcgm-exporter@4.5.3-4.8.2:deployment/values.yaml:266-268, "
        "deployment/templates/metrics-configmap.yaml:9-11, internal/pkg/counters/counter_config.go:110; "
        "NVIDIA/DCGM@v4.5.3:dcgmlib/dcgm_fields.h:810,815; "
        "NVIDIA/go-dcgm@ec245c09fe3e:pkg/dcgm/const_fields.go:1374-1375", "2026-11-29",
        "platform_constructs/exporters.py DCGM_COUNTERS",
    ),
    Fact(
        "dcgm.health.pcie-replay-rate", "DCGM's PCIe health watch warns (DCGM_FR_PCI_REPLAY_RATE) when a GPU's PCIe "
        "replay counter rises in one minute by more than ceil(rate per lane x lanes), the rate per lane being "
        "0.15, 0.3, 0.48, 0.96, 1.92, 3.84 for PCIe Gen1 to Gen6 (a 1e-12 bit error rate): 31 a minute on a Gen5 "
        "x16 link, 16 on Gen4 x16",
        "NVIDIA/DCGM@v4.5.3:modules/health/DcgmHealthWatch.cpp:1346-1369 (GetExpectedPcieReplayRate), 1393-1402 (one "
        "minute), 1454-1473; "
        "dcgmlib/dcgm_errors.h:236,524-527 (message, next step: reseat, field diagnostic)", "2026-11-29",
        "observability/rules.py PCIE_REPLAYS_PER_LANE and openpod:gpu_pcie_replay_bound:per_minute (each GPU's "
        "bound from its link's generation and width, DCGM_FI_DEV_PCIE_LINK_GEN / _WIDTH, which "
        "platform_constructs/exporters.py DCGM_COUNTERS adds); thresholds.py pcie_replays_per_minute (31) only "
        "where no link is reported; dcgm-exporter 4.5.3-4.8.2 bundles DCGM 4.5.3",
    ),
    Fact(
        "hyperpod.deep-health-check.dcgm-level", "4",
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-deep-health-checks.html",
        "2026-11-23",
        "HyperPod's instance-level deep health check runs DCGM diagnostics at level 4; the spec's "
        "instance_groups[].dcgm_level offers it (default 2: minutes, not hours, before a rebooted node works again)",
    ),
)
