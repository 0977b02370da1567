"""``python -m node_agent``: diagnose logs offline, run the detector or the controller, run a deep check.

Bad input (missing files, unparsable recorded output, unknown instance type)
prints ``error: ...`` lines and exits 2, never a traceback.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

import click

from openpod_core import instance_types
from node_agent.findings import Finding, strongest

EXIT_USAGE = 2


def fail(lines: list[str] | str) -> None:
    for line in [lines] if isinstance(lines, str) else lines:
        click.echo(f"error: {line}", err=True)
    sys.exit(EXIT_USAGE)


def _read(path: str, what: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError as e:
        fail(f"{what} {path}: {e.strerror}")


def _itype(name: str | None):
    if not name:
        return None
    try:
        return instance_types.get(name)
    except instance_types.UnknownInstanceType as e:
        fail(f"--instance-type: {e}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """openpod node agent: detect node faults and heal nodes."""


@main.command()
@click.argument("path")
@click.option("--nvidia-smi", "nvidia_smi", metavar="FILE",
              help="recorded `nvidia-smi -q` or `nvidia-smi --query-gpu=... --format=csv` output")
@click.option("--dcgmi", metavar="FILE", help="recorded `dcgmi diag -r N -j` output")
@click.option("--all-reduce", "all_reduce", metavar="FILE", help="recorded nccl-tests all_reduce_perf output")
@click.option("--neuron-ls", "neuron_ls", metavar="FILE", help="recorded `neuron-ls --json-output` output")
@click.option("--instance-type", "instance_type", help="e.g. p5.48xlarge: enables device-count and bandwidth rules")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per finding")
def diagnose(path: str, nvidia_smi: str | None, dcgmi: str | None, all_reduce: str | None, neuron_ls: str | None,
             instance_type: str | None, as_json: bool) -> None:
    """Classify a kernel log (PATH, or - for stdin) and recorded tool output with the live rules."""
    from node_agent import deep_check, gpu, neuron
    from node_agent.kernel_engine import KernelLogEngine
    from node_agent.logfollow import BinaryLog, read_lines

    itype = _itype(instance_type)
    findings: list[Finding] = []
    if path != "-" and not os.path.isfile(path):
        fail(f"kernel log {path}: no such file")
    engine = KernelLogEngine()  # the live detector's engine: same rules, same repeat windows, on the log's time
    try:
        for line, ts in read_lines(path):
            f = engine.feed(line, ts)
            if f:
                findings.append(f)
    except OSError as e:
        fail(f"kernel log {path}: {e.strerror}")
    except BinaryLog as e:
        fail(f"kernel log {path}: {e}; expected text (dmesg, journalctl -k, /var/log/messages or kern.log); "
             "for a binary journal file run journalctl -k --file=FILE | python -m node_agent diagnose -")
    recorded = [(nvidia_smi, "--nvidia-smi", lambda t: gpu.check_gpus(gpu.parse_recorded(t), itype)),
                (dcgmi, "--dcgmi", deep_check.check_dcgmi),
                (all_reduce, "--all-reduce", lambda t: deep_check.check_nccl(
                    t, itype.allreduce_busbw_floor_gbs if itype else 0)),
                (neuron_ls, "--neuron-ls", lambda t: neuron.check_neuron(neuron.parse_neuron_ls(t), itype))]
    for file, option, check in recorded:
        if not file:
            continue
        text = _read(file, option)
        try:
            findings.extend(check(text))
        except (ValueError, KeyError) as e:
            fail(f"{option} {file}: {e}")
    if engine.untimed:
        click.echo(f"warning: {engine.untimed} kernel-log lines carry no time of their own (e.g. journalctl -o cat): "
                   "they count in no repeat window (soft-lockup-repeated, block-io-error-repeated)", err=True)
    if as_json:
        for f in findings:
            click.echo(f.to_json())
        return
    if not findings:
        click.echo("no faults found")
        return
    rows = [(f.action.value, f.severity.value, f.fault, f.rule, f.device or "-",
             f.evidence if len(f.evidence) <= 100 else f.evidence[:97] + "...") for f in findings]
    head = ("ACTION", "SEVERITY", "FAULT", "RULE", "DEVICE", "EVIDENCE")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
    for r in [head] + rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5])
    needs = strongest(findings)
    acting = sum(1 for f in findings if f.action.value != "none")
    click.echo(f"\n{len(findings)} findings, {acting} need node action; node needs: {needs.value}")


@main.command()
def rules() -> None:
    """Print the rule table (Markdown)."""
    from node_agent.rules import rules_markdown

    click.echo(rules_markdown(), nl=False)


def _kube(factory, **kw):
    from kubernetes.config import ConfigException

    try:
        return factory(**kw)
    except ConfigException as e:
        fail(f"no Kubernetes API configuration (in-cluster or kubeconfig): {e}")


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="agent config YAML")
@click.option("--node", "node_name", envvar="NODE_NAME", required=True, help="this node's name (env NODE_NAME)")
@click.option("--instance-type", "instance_type", envvar="INSTANCE_TYPE", default=None,
              help="override; default: the node's node.kubernetes.io/instance-type label, then IMDS")
def detector(config_path: str | None, node_name: str, instance_type: str | None) -> None:
    """Run the detector on this node (the DaemonSet's entry point)."""
    from openpod_core import labels as L
    from node_agent.config import load_agent_config
    from node_agent.detector import Detector, instance_type_from_imds, resolve_instance_type
    from node_agent.kube import KubeCluster
    from node_agent.metrics import DetectorMetrics, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config, problems = load_agent_config(config_path)
    for p in problems:
        logging.error("config: %s", p)
    cluster = _kube(KubeCluster)
    try:
        label = cluster.get_node(node_name).labels.get(L.INSTANCE_TYPE)
    except Exception as e:  # noqa: BLE001
        fail(f"--node {node_name}: cannot read the node from the Kubernetes API: {e}")
    name = instance_type or label or instance_type_from_imds()
    itype, problem = resolve_instance_type(name)
    if problem:
        logging.error("%s", problem)
    metrics = DetectorMetrics()
    serve(metrics.registry, config.metrics_port)
    det = Detector(cluster, node_name, itype, config, metrics)
    from node_agent.rules import rule

    det.report([rule("config-invalid").finding(p, "config") for p in problems])
    det.stop_event = _stop_on_signals()
    det.run()


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="controller config YAML")
def controller(config_path: str | None) -> None:
    """Run the remediation controller (the Deployment's entry point)."""
    from node_agent.cloud import AwsCloud
    from node_agent.config import load_controller_config
    from node_agent.controller import Controller
    from node_agent.kube import KubeCluster
    from node_agent.metrics import ControllerMetrics, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_controller_config(config_path)
    except ValueError as e:
        fail(str(e).splitlines())
    metrics = ControllerMetrics()
    serve(metrics.registry, config.metrics_port)
    cluster = _kube(KubeCluster, component="openpod-remediation")
    elector = None
    le = config.leader_election
    if le.enabled:
        import os
        import socket

        from node_agent.leader import LeaseElector

        elector = LeaseElector(cluster.api_client, name=le.lease_name, namespace=le.namespace,
                               identity=os.environ.get("POD_NAME") or socket.gethostname(),
                               lease_duration=le.lease_duration_seconds, renew_deadline=le.renew_deadline_seconds,
                               retry_period=le.retry_period_seconds)
    Controller(cluster, AwsCloud(region=config.region), config, metrics, elector=elector).run(_stop_on_signals())


if __name__ == "__main__":  # pragma: no cover
    main()
