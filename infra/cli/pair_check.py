"""``openpod pair-check``: the two-node all-reduce check of node_agent/pair_check.py, on demand.

``render`` writes the check's objects (apply them with ``kubectl apply -f``); once the Job's pod of
index 0 has finished, ``decide`` reads that pod's log and says
pass or fail against the group's floor.
"""

from __future__ import annotations

import sys

import click
import yaml

from infra.cli.common import emit, fail, group_or_exit, output_option, spec_option


@click.group("pair-check")
def pair_check() -> None:
    """Two-node all-reduce over EFA between two nodes of an instance group."""


@pair_check.command()
@spec_option
@click.option("--group", required=True, help="instance group of both nodes")
@click.option("--nodes", required=True, help="two node names, comma-separated (e.g. the new node and a healthy peer)")
@click.option("--image", required=True,
              help="the training image (torch) or an image with nccl-tests built with MPI=1, Open MPI and sshd")
@click.option("--tool", type=click.Choice(["nccl-tests", "torch"]), default=None,
              help="default: nccl-tests on NVIDIA groups, torch otherwise")
@click.option("--name", default=None, help="object name (default: pair-<group>)")
def render(spec_path, group, nodes, image, tool, name) -> None:
    """Print the check's Secret/Service/Job as YAML."""
    from node_agent import pair_check as pc

    g = group_or_exit(spec_path, group)
    pair = tuple(n.strip() for n in nodes.split(",") if n.strip())
    try:
        objs = pc.job(name or f"pair-{group}", g.type, pair, image, tool=tool)
    except ValueError as e:
        fail(f"--nodes/--tool/--image: {e}")
    click.echo(yaml.safe_dump_all(objs, sort_keys=False), nl=False)


@pair_check.command()
@spec_option
@click.option("--group", required=True, help="instance group of both nodes")
@click.argument("log", type=click.File("r"))
@output_option()
def decide(spec_path, group, log, output="table") -> None:
    """Read rank 0's log (a file, or - for stdin); exit 0 on pass, 1 on fail."""
    from node_agent import pair_check as pc

    g = group_or_exit(spec_path, group)
    try:
        r = pc.decide(log.read(), g.type)
    except ValueError as e:
        fail(f"{log.name}: {e}")
    verdict = "pass" if r.passed else "fail"
    emit({"group": g.name, "instance_type": g.instance_type, "verdict": verdict, "busbw_gbs": r.busbw_gbs,
          "floor_gbs": r.floor_gbs, "findings": [f.to_dict() for f in r.findings]}, output,
         [f"{verdict}: busbw {r.busbw_gbs:.1f} GB/s, floor {r.floor_gbs:.1f} GB/s ({g.instance_type})",
          *(f"  {f.rule}: {f.evidence}" for f in r.findings)])
    sys.exit(0 if r.passed else 1)
