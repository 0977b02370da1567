"""docs/observability.md, rendered from the metric table, the rules and the scrape jobs (one source each)."""

from __future__ import annotations

from observability.metrics import METRICS
from observability.rules import alerts, records
from observability.scrape import scrape_configs
from observability.thresholds import AlertThresholds


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def observability_md() -> str:
    t = AlertThresholds()
    out = [
        "# Observability",
        "",
        "Generated from `observability/` by `python -m infra docs`; do not edit by hand.",
        "",
        "The spec's `observability:` section (on by default, see [spec.md](spec.md)) creates an Amazon Managed Service for Prometheus workspace, a managed "
        "scraper of the cluster, the rule groups below and an alert manager publishing to an encrypted SNS "
        "topic (`platform_constructs/observability.py`); with `grafana: true`, also an Amazon Managed Grafana "
        "workspace (IAM Identity Center sign-in) whose role may only query the Prometheus workspace. The same rules are in "
        "[prometheus-rules.yaml](prometheus-rules.yaml) (default thresholds) for an in-cluster Prometheus; "
        "`openpod rules --out DIR` writes them at the spec's thresholds with the scrape configuration. "
        "`promtool test rules` "
        "runs every alert on series that fire it and on series that must not "
        "(`tests/observability/test_rules.py`).",
        "",
        "## Metrics: a stable interface",
        "",
        "The metrics the rules and dashboards read, and what alerts and dashboards outside this repository "
        "may rely on: the names, types, units and label names below are an interface. Renaming or removing "
        "one, or changing its meaning, is a breaking change: the old name is served beside the new one for "
        "a release and the change is noted here. Names are as scraped (counters end in `_total`). Our own "
        "rows are checked against the exporters' registries by `tests/observability/test_metrics_table.py`; "
        "third-party rows cite the pinned source (exporter versions below). Scraping adds `job`, `instance`, "
        "`namespace`, `pod`, `node` and, for training pods, `training_job` (the JobSet's name); "
        "kube-state-metrics and dcgm-exporter are scraped with `honor_labels` (their `node`, `namespace`, "
        "`pod` name the object described, not the exporter pod).",
        "",
        "Semantics an alert can count on:",
        "",
        "- **Counters start at 0** for every label set known when the exporter starts (each rule outside the "
        "kernel-log catalog, each check, each configured instance group's actions, reasons and results), so "
        "`increase()` sees the first event.",
        "- **A training job's figures are job-wide and served by every pod of the job** (each node's local "
        "rank 0): aggregate by `namespace, training_job` (`max`), never alert per pod.",
        "- `openpod_checkpoint_failures` **only grows** over the job's incarnations (read it with `delta()` or "
        "`increase()`); `openpod_checkpoint_restore_source_failures` and `openpod_checkpoint_restored_older` "
        "**hold** for the incarnation that restored; `openpod_checkpoint_last_durable_timestamp_seconds` "
        "carries over restarts (the job's first start while no checkpoint is durable): alert on "
        "`time() - min by (namespace, training_job) (...)`.",
        "- `openpod_train_compute_seconds` is a rank's own compute before the gradient collective; step "
        "times are equal across ranks (collectives), so compare ranks by it.",
        "",
        "Third-party exporters at the pinned versions: Kueue v0.19.2 (`kueue_*`, "
        "kubernetes-sigs/kueue@v0.19.2:pkg/metrics/metrics.go), kube-state-metrics 2.20.0 (chart 8.4.0: "
        "`kube_node_*`, and `openpod_kueue_workload_*` from its custom resource state configured in "
        "platform_constructs/exporters.py), dcgm-exporter 4.5.3-4.8.2 (`DCGM_FI_*`, its default counters), "
        "the Neuron monitor 1.3.0 (`neuroncore_*`, `neuron_*`, `execution_errors_total`, "
        "`hardware_ecc_events_total`), and Prometheus's own `up`.",
        "",
        "| metric | type | unit | labels | exported by | source | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in METRICS:
        meaning = m.help
        if m.pending:
            meaning += f" (added by {m.pending}; the rules using it stay empty until then)"
        if m.requires:
            meaning += f". Needs {m.requires}"
        labels = ", ".join(f"`{x}`" for x in m.labels) or "-"
        out.append(f"| `{m.name}` | {m.type} | {m.unit} | {labels} | {m.exporter} | {_cell(m.source)} "
                   f"| {_cell(meaning)} |")
    out += ["", "## Scrape jobs", "", "`observability/scrape.py`: Kubernetes service discovery, no addresses.", "",
            "| job | discovers |", "|---|---|"]
    for job in scrape_configs():
        sd = job["kubernetes_sd_configs"][0]
        where = ", ".join(sd.get("namespaces", {}).get("names", [])) or "all namespaces"
        def rules(action: str) -> str:
            return "; ".join(f"{r['source_labels'][0].removeprefix('__meta_kubernetes_')} ~ `{r['regex']}`"
                             for r in job["relabel_configs"] if r.get("action") == action)
        role = {"pod": "pods", "endpoints": "service endpoints"}[sd["role"]]
        drops = f"; drop {rules('drop')}" if rules("drop") else ""
        honor = "; `honor_labels`" if job.get("honor_labels") else ""
        out.append(f"| `{job['job_name']}` | {role} in {where}; keep {_cell(rules('keep'))}{_cell(drops)}{honor} |")
    out += ["", "## Recording rules", "", "| record | meaning |", "|---|---|"]
    out += [f"| `{r.record}` | {_cell(r.help)} |" for r in records()]
    from observability import routing
    from observability.failure_modes import CLOUDWATCH_ALARMS, MODES, ROWS, coverage

    sev = {a.name: a for a in alerts(t)} | {c.name: c for c in CLOUDWATCH_ALARMS}

    def alert_cell(name: str) -> str:
        a = sev[name]
        if name in {c.name for c in CLOUDWATCH_ALARMS}:
            where = "alert topic (CloudWatch alarm)"
        else:
            receiver, group_by = routing.receiver_of({"alertname": name, "severity": a.severity,
                                                      **{k: "x" for k in a.about}})
            where = f"{receiver} by {', '.join(group_by)}"
            inh = routing.inhibited_by(name)
            if inh:
                where += "; silenced by " + ", ".join(inh)
        return f"[{name}](runbooks.md#{name.lower()}) ({a.severity}; {where})"

    covered, total = coverage()
    out += ["", "## Failure modes", "",
            "`observability/failure_modes.py`: every component the platform runs or depends on, each way it "
            f"fails ({', '.join(MODES)}), the signal that shows it and the alert that says so, with severity, "
            "receiver, grouping and inhibition as the rules and the route have them; each alert links to its "
            "runbook ([runbooks.md](runbooks.md)).", "",
            f"**Coverage: {covered} of {total} failure modes have an alert ({covered / total:.0%}).** "
            f"{_incidents_line()}", "",
            "| component | mode | failure | signal | alerts (severity; receiver by grouping) |", "|---|---|---|---|---|"]
    for r in ROWS:
        cell = "<br>".join(alert_cell(n) for n in r.alerts) or f"not covered: {r.not_covered}"
        out.append(f"| {r.component} | {r.mode} | {_cell(r.failure)} | {_cell(r.signal)} | {_cell(cell)} |")
    out += _engine_surface()
    out += ["", "## Alerts", "",
            "Thresholds are the spec's `observability.alerts` (defaults shown). Severity: `critical` pages, "
            "`warning` opens a ticket, `info` is for the dashboard. Every selector names its scrape `job`: a team "
            "pod serving the same metric names raises nothing. What to do: [runbooks.md](runbooks.md).", "",
            "| alert | severity | about | fires when |", "|---|---|---|---|"]
    for a in alerts(t):
        when = f"`{_cell(a.expr)}`" + (f" for {a.for_}" if a.for_ != "0m" else "")
        out.append(f"| [{a.name}](runbooks.md#{a.name.lower()}) | {a.severity} | "
                   f"{', '.join(a.about) or 'the fleet'} | {_cell(a.description)} {when} |")

    out += ["", "## Routing: one notification per incident", "",
            "`observability/routing.py`, the alert manager's configuration (the workspace's, and the end-to-end "
            "test's `tests/observability/test_alerting_end_to_end.py`: one hung job on 64 nodes, one "
            "notification; `tests/observability/test_alerting_incidents.py`: flapping, a scrape gap, label churn, "
            "restarts, a crash loop, a fleet event, one notification each). Alerts are grouped by what they are about; `info` alerts notify no one; the "
            "always-firing `OpenpodWatchdog` goes to its own SNS topic every 5 minutes, and a CloudWatch alarm on "
            "that topic (fewer than 1 message in 5 minutes, 3 periods, missing data breaching) pages the alert "
            "topic when it stops: a dead-man's switch for rule evaluation, the alert manager and delivery. It "
            "does not see a workspace at its active series or ingestion rate quota: AMP refuses the samples past "
            "it (HTTP 429) and alerts on them go quiet while the watchdog (`vector(1)`, no samples) still fires. "
            "So two CloudWatch alarms on AMP's usage metrics (AWS/Usage ResourceCount, Resource ActiveSeries and "
            "IngestionRate, ResourceId the workspace) page the alert topic past "
            "`observability.alerts.amp_usage_percent` (80) of the quotas the spec names (`amp_active_series_quota`, "
            "`amp_ingestion_rate_quota`: AMP's defaults; set the applied values after an increase). Samples AMP "
            "discards for other reasons are not alarmed (`docs/facts.md`, Not yet verified: AMP discarded "
            "samples).", "",
            "| alerts with | receiver | grouped by |", "|---|---|---|"]
    for sub in routing.route()["routes"]:
        out.append(f"| `{_cell(sub['matchers'][0])}` | {sub['receiver']} | "
                   f"{', '.join(sub.get('group_by', routing.route()['group_by']))} |")
    out.append(f"| anything else | {routing.PAGE} | alertname |")
    out += ["", "Inhibitions (the source alert silences the targets for the same labels):", "",
            "| source | silences | when equal |", "|---|---|---|"]
    out += [f"| {src}{''.join(f' ({_cell(m)})' for m in src_m)} | "
            f"{_cell(targets.replace('|', ', '))}{''.join(f' ({_cell(m)})' for m in tgt_m)} | "
            f"{', '.join(equal) or 'always'} |"
            for src, targets, equal, src_m, tgt_m in map(routing.expanded, routing.INHIBIT)]
    out += _incident_pages()
    from observability.dashboards import DASHBOARDS

    out += ["", "## Dashboards", "",
            "`openpod dashboards --out DIR` writes them as Grafana JSON (built with grafana-foundation-sdk; "
            "`observability/dashboards.py`); each has a `datasource` variable, and every panel names it, of the type "
            "Amazon Managed Grafana gives an AMP workspace (`grafana-amazonprometheus-datasource`, from workspace "
            "version 12; the workspace is pinned to 12.4). FSx capacity is a CloudWatch metric: its alarm pages, "
            "it is on no dashboard here.", "",
            "| dashboard | uid | panels |", "|---|---|---|"]
    for d in DASHBOARDS:
        panels = "; ".join(f"{row}: " + ", ".join(p.title for p in ps) for row, ps in d.rows)
        out.append(f"| {d.title} | `{d.uid}` | {_cell(panels)} |")
    out += [
        "", "## Known gaps", "",
        "- Training pods are scraped when `openpod submit --runtime openpod` started them (it sets "
        "`--metrics-port` and the `prometheus.io/*` annotations; each node's local rank 0 serves); a "
        "`--runtime torchrun` job opts in with its own annotations.",
        "- The straggler signal is exact under DDP (gradients are all-reduced after the compute it measures); "
        "under FSDP2 the forward and backward hold their own collectives, so fast ranks wait inside the "
        "measured time and a slow rank stands out less (per-rank kernel timing would lift it).",
        "- `runbook_url` annotations are paths relative to the repository (`docs/runbooks.md#<alert>`); "
        "prefix them with the repository's address in a notification template.",
        "- `openpod_kueue_workload_*` and `openpod_kueue_localqueue_info` need kube-state-metrics' custom resource "
        "state (on by default here); with it off, `OpenpodWorkloadStarving` stays silent. Its ClusterQueue comes "
        "from the LocalQueue's series: a workload naming a LocalQueue that does not exist pages by LocalQueue.",
        "- node exporter, kube-state-metrics and (with NVIDIA groups) the DCGM exporter are deployed as pinned "
        "charts (platform_constructs/exporters.py); the Neuron monitor (with Trainium groups) is our own DaemonSet "
        "from AWS's manifest (platform_constructs/neuron_monitor.py: the chart's template drops pod annotations). "
        "Its metric names are read in AWS's dashboard and the CloudWatch agent, not in the exporter's own source "
        "(facts: neuron-monitor.metric-names); not yet seen on a live Trainium node.",
    ]
    return "\n".join(out) + "\n"


def _engine_surface() -> list[str]:
    """The engines' own metric surface (observability/engine_metrics) with each family's use, and the coverage."""
    from observability.engine_metrics import ENGINES, ROWS, coverage

    out = ["", "## The engines' metrics", "",
           "`observability/engine_metrics/`: every metric family each engine serves at its pinned version (Kueue's "
           "`pkg/metrics/metrics.go`, JobSet's beyond controller-runtime's, controller-runtime's own that both "
           "managers serve (reconciles, work queues, leader election, API client, webhooks), every row of "
           "dcgm-exporter's default counters enabled or not, kube-state-metrics' node, pod, deployment, daemonset "
           "and statefulset stores and our Kueue Workload state), with "
           "what the platform does with it: read by an alert (named), on a dashboard only, or unused and why. "
           "The failure-mode table above is our enumeration; this one is the engines', so a signal no rule reads "
           "is a decision written down (`tests/observability/test_engine_metrics.py` keeps every verdict true). "
           "The Go runtime's and the process's families (go_*, process_*) that controller-runtime registers beside "
           "its own are left out, and so are kube-state-metrics' other stores (jobs, services, ...): no rule "
           "reads them.", "",
           "| engine | families | read by an alert | dashboard only | unused |", "|---|---|---|---|---|"]
    for engine, c in coverage():
        out.append(f"| {engine} | {c['families']} | {c['alert']} | {c['dashboard']} | {c['unused']} |")
    for engine in ENGINES:
        out += ["", f"### {engine}", "", "| metric | type | source | use |", "|---|---|---|---|"]
        for r in (r for r in ROWS if r.engine == engine):
            use = ("alerts: " + ", ".join(r.alerts) + ("; dashboard" if r.dashboard else "") if r.alerts
                   else "dashboard" if r.dashboard else f"unused: {r.unused}")
            out.append(f"| `{r.name}` | {r.type} | {_cell(r.source)} | {_cell(use)} |")
    return out


def _incidents_line() -> str:
    from observability.incidents import INCIDENTS, coverage

    checked, rows = coverage()
    return (f"One incident, one page: {checked} of {rows} failure modes with an alert checked ({len(INCIDENTS)} "
            "incidents against the real Alertmanager; see Routing).")


def _incident_pages() -> list[str]:
    """The incidents checked against Alertmanager, and those that notify more than once, with why."""
    from observability.incidents import INCIDENTS, row_of

    more = [i for i in INCIDENTS if i.notifications != 1]
    out = ["", f"**{_incidents_line()}** `observability/incidents.py` lists each incident of a failure mode with "
           "every alert it raises (follow-on ones included, labelled as the rules label them) and the alerts "
           "left to page; `tests/observability/test_incident_pages.py` posts each alone to the real "
           "Alertmanager with this configuration and counts its notifications (the groups its active alerts "
           f"fall in). {len(INCIDENTS) - len(more)} notify once; these do not:", "",
           "| incident | failure mode | notifications | why |", "|---|---|---|---|"]
    out += [f"| {_cell(i.name)} | {row_of(i).component}: {_cell(row_of(i).failure)} | {i.notifications} | "
            f"{_cell(i.why)} |" for i in more]
    return out
