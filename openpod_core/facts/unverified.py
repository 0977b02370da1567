"""Facts the code relies on whose source has not been found or read yet: ``docs/facts.md`` lists them apart,
so nobody mistakes them for checked ones. Each says what the code assumes today."""

from __future__ import annotations

# Facts the code relies on whose source has not been found or read yet: shown in docs/facts.md so nobody
# mistakes them for checked ones. Each says what the code assumes today.
UNVERIFIED: tuple[tuple[str, str], ...] = (
    ("kube-proxy add-on tolerations", "the kube-proxy add-on's DaemonSet manifest is not published, so that it "
                                      "tolerates the system group's CriticalAddonsOnly taint (it ran there before "
                                      "the taint) was not read; check on a cluster: kubectl -n kube-system get ds "
                                      "kube-proxy -o jsonpath='{.spec.template.spec.tolerations}'"),
    ("p6e-gb200.36xlarge vCPUs, memory and GPU memory", "144 vCPUs, 960 GiB and 185 GiB per GPU were not compared "
                                                        "with EC2's specifications: moto's DescribeInstanceTypes "
                                                        "recording has no p6e-gb200 row (every other row matches "
                                                        "it, fact ec2.describe-instance-types.moto)"),
    ("UltraServer Capacity Blocks and the 64-instance limit", "whether EC2's 64 instances per Capacity Block "
                                                               "(fact ec2.capacity-blocks.max-instances) also "
                                                               "bounds UltraServer blocks (four u-p6e-gb200x72 "
                                                               "are 72 instances) was not found; the spec "
                                                               "applies the limit to instance blocks only "
                                                               "(botocore's InstanceCount doc names the 64 for "
                                                               "instance blocks, UltraserverCount none)"),
    ("aws-fsx-csi-driver add-on availability", "pinned v1.7.0-eksbuild.1 (fact eks.addon.aws-fsx-csi-driver) is "
                                               "a real add-on version, but whether EKS offers it for each allowed "
                                               "eks.version was not read anywhere (aws/containers-roadmap#2625: the "
                                               "add-on once lagged a Kubernetes release; newer drivers v1.8.0 and "
                                               "v1.9.0 exist, fact aws-fsx-csi-driver.releases); `openpod "
                                               "preflight` checks it against describe-addon-versions"),
    ("eks-pod-identity-agent add-on version", "pinned v1.3.9-eksbuild.3; the EKS guide publishes no version "
                                              "table for this add-on (pod-id-agent-setup and add-ons-pod-id pages "
                                              "read). Public Terraform configurations pin the same string next "
                                              "to Kubernetes 1.33/1.34 add-ons (e.g. kube-proxy v1.34.0-eksbuild.4; "
                                              "found by text search, 2026-11-23), so it is a real add-on version, "
                                              "but no AWS source and nothing on its currency; `openpod preflight` "
                                              "checks it against describe-addon-versions"),
    ("currency of the add-on pins", "the guide's tables were read in copies of unknown crawl date (the newest "
                                    "found is named in each fact); a live check is `openpod preflight` "
                                    "(describe-addon-versions)"),
    ("CUDA base image digests are indexes", "training/Dockerfile pins nvidia/cuda:12.8.1-cudnn-{devel,runtime}-"
                                             "ubuntu24.04 at sha256:24c8e358... and sha256:ac55d124... (facts "
                                             "image.cuda-12.8.1-cudnn-*-ubuntu24.04.digest), taken from public "
                                             "repositories' pins: one of them resolved the runtime digest as the "
                                             "tag's manifest list; the devel digest is taken as its tag's index "
                                             "because it differs from the recorded linux/amd64 manifest. That both "
                                             "list linux/arm64 (the GB200 build) was not read: Docker Hub and NGC "
                                             "are out of reach here; `docker buildx imagetools inspect` on each "
                                             "pinned reference checks it"),
    ("GB200 ComputeDomains on a cluster", "the platform installs nvidia-dra-driver-gpu 25.12.0 with ComputeDomains "
                                          "only (GPUs stay with the device plugin), the kubelet plugin on the "
                                          "multi-node-NVLink types and the controller on the system group (facts "
                                          "chart.nvidia-dra-driver-gpu*, dra.compute-domain.*), where the EKS "
                                          "guide installs 25.8.0; that a ComputeDomain forms, its IMEX daemons "
                                          "start and pods get channels on P6e-GB200 nodes of the AL2023 NVIDIA AMI "
                                          "needs a real UltraServer capacity block and was never run"),
    ("Neuron chart 1.1.2 on a cluster", "the device plugin image chart 1.1.2 ships was not read (only its values' "
                                        "placement keys); that it advertises trn2u.48xlarge devices was not tried"),
    ("ECR Public mirror of python", "node_agent/Dockerfile pins public.ecr.aws/docker/library/python:"
                                    "3.11-slim-bookworm at Docker Hub's index digest (fact image.python-3.11-slim-"
                                    "bookworm.index-digest); that the ECR Public mirror serves the same digest was "
                                    "not checked (a missing digest fails the build, it cannot pull another image)"),
    ("AMP scraper and tls_config", "the Kueue job sets tls_config.insecure_skip_verify (Kueue's self-signed "
                                   "serving certificate); the AMP guide's list of allowed config sections (global, "
                                   "scrape_config, static_config, relabel_config, metric_relabel_configs, "
                                   "kubernetes_sd_config) does not name tls_config. If CreateScraper refuses it, the "
                                   "scraper (and the deploy) fails; then set observability.collector to in-cluster. "
                                   "CloudWatch's managed Prometheus collectors, a different service, do list "
                                   "tls_config "
                                   "(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/managed-"
                                   "prometheus-collectors-scraper-configuration.html, read 2026-11-23); that says "
                                   "nothing certain about AMP's CreateScraper. Searched again 2026-11-29: the "
                                   "Terraform provider's acceptance scraper (no tls_config) and public AMP scraper "
                                   "configurations that carry tls_config.ca_file (not known to have been "
                                   "accepted) settle nothing"),
    ("AMP discarded samples", "no alarm on samples AMP discards: a re:Post article names DiscardedSamples in "
                              "AWS/Prometheus (https://www.repost.aws/articles/ARiKPuGDAgT5SPyidVr0uqdA, by "
                              "reason, no dimensions) and a fork of yet-another-cloudwatch-exporter (found by text "
                              "search, 2026-11-29) reads the workspace from a Workspace dimension, but AMP's "
                              "usage-metrics page could not be read that far (fact amp.cloudwatch.usage-metrics) "
                              "and AWS's accelerator alarms only on ActiveSeries and IngestionRate; a CloudWatch "
                              "alarm matches only a metric's exact dimensions, so a guess alarms on nothing. Live "
                              "check: aws cloudwatch list-metrics --namespace AWS/Prometheus"),
    ("AMP's current ingestion rate default", "observability.alerts.amp_ingestion_rate_quota defaults to 140,000 "
                                             "samples per second from an earlier copy of AMP's quota page; the "
                                             "current page's default was not read (AWS's accelerator thresholds "
                                             "at 136,000, 80% of 170,000). A higher applied quota makes "
                                             "OpenpodAmpIngestionRateNearQuota page early, a lower one late; "
                                             "the workspace's applied value is in Service Quotas (aps, "
                                             "Ingestion rate per workspace): set it in the spec"),
    ("AMP scraper and Kueue's metrics", "the scraper's bearer token (the documented credentials_file form, see "
                                        "fact amp.scraper.authorization) passes Kueue's TokenReview and "
                                        "SubjectAccessReview as aps-collector-user; the AMP guide shows it only "
                                        "against the API server, not a pod's endpoint"),
)
