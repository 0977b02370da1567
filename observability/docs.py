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
        "## Metrics",
        "",
        "The metrics the rules and dashboards read. Names are as scraped (counters end in `_total`). Our own "
        "rows are checked against the exporters' registries by `tests/observability/test_metrics_table.py`; "
        "Kueue's cite the pinned source line. Scraping adds `job`, `namespace`, `pod`, `node` and, for "
        "training pods, `training_job` (the JobSet's name).",
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
        out.append(f"| `{job['job_name']}` | {role} in {where}; keep {_cell(rules('keep'))}{_cell(drops)} |")
    out += ["", "## Recording rules", "", "| record | meaning |", "|---|---|"]
    out += [f"| `{r.record}` | {_cell(r.help)} |" for r in records()]
    out += ["", "## Alerts and what to do", "",
            "Thresholds are the spec's `observability.alerts` (defaults shown). Severity: `critical` pages, "
            "`warning` opens a ticket, `info` is for the dashboard.", "",
            "| alert | severity | fires when | what to do |", "|---|---|---|---|"]
    for a in alerts(t):
        when = f"`{_cell(a.expr)}`" + (f" for {a.for_}" if a.for_ != "0m" else "")
        out.append(f"| **{a.name}** | {a.severity} | {_cell(a.description)} {when} | {_cell(a.runbook)} |")
    from observability.dashboards import DASHBOARDS

    out += ["", "## Dashboards", "",
            "`openpod dashboards --out DIR` writes them as Grafana JSON (built with grafana-foundation-sdk; "
            "`observability/dashboards.py`); each has a `datasource` variable for the Prometheus data source.", "",
            "| dashboard | uid | panels |", "|---|---|---|"]
    for d in DASHBOARDS:
        panels = "; ".join(f"{row}: " + ", ".join(p.title for p in ps) for row, ps in d.rows)
        out.append(f"| {d.title} | `{d.uid}` | {_cell(panels)} |")
    out += [
        "", "## Known gaps", "",
        "- Training pods are scraped when `openpod submit --runtime openpod` started them (it sets "
        "`--metrics-port` and the `prometheus.io/*` annotations; each node's local rank 0 serves); a "
        "`--runtime torchrun` job opts in with its own annotations.",
        "- The straggler score compares a rank with the other ranks of its own node (each node's local rank 0 "
        "serves it); a whole slow node shows in the job's step time (`OpenpodStepTimeRegression`), not here.",
        "- node exporter, kube-state-metrics and (with NVIDIA groups) the DCGM exporter are deployed as pinned "
        "charts (platform_constructs/exporters.py); the Neuron monitor (with Trainium groups) is our own DaemonSet "
        "from AWS's manifest (platform_constructs/neuron_monitor.py: the chart's template drops pod annotations). "
        "Its metric names are read in AWS's dashboard and the CloudWatch agent, not in the exporter's own source "
        "(facts: neuron-monitor.metric-names); not yet seen on a live Trainium node.",
    ]
    return "\n".join(out) + "\n"
