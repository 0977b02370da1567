"""Network topology only on instance types EC2 publishes topology for (infra/governance/topology_types.py)."""

from __future__ import annotations

from infra.governance import queues
from infra.governance.topology_types import TOPOLOGY_TYPES
from infra.spec.loading import load_spec
from openpod_core import instance_types
from tests.conftest import EXAMPLES


def test_a_p5_4xlarge_queue_gets_no_network_topology():
    """EC2 publishes no topology for p5.4xlarge: no node would carry the layer labels, so a flavor on the
    network topology would admit nothing that asks for a level."""
    spec = load_spec(EXAMPLES / "default.yaml")
    g = spec.instance_groups[1].model_copy(update={"instance_type": "p5.4xlarge"})
    assert g.type.is_accelerated
    assert queues.topology_of(g) == queues.HOST_TOPOLOGY


def test_every_accelerated_type_on_a_network_topology_is_one_ec2_publishes():
    # EC2's list has p5.48xlarge and the g6e sizes but neither p5.4xlarge nor any g5 size
    without = {"p5.4xlarge"} | {n for n in instance_types.INSTANCE_TYPES if n.startswith("g5.")}
    for name in instance_types.INSTANCE_TYPES:
        t = instance_types.get(name)
        if t.is_accelerated and not t.ultraserver:
            assert (name in TOPOLOGY_TYPES) == (name not in without), name
