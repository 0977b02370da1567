"""Instance types EC2 publishes network topology for: only their nodes carry the
``topology.k8s.aws/network-node-layer-N`` labels Kueue's network topology levels read.

Source: Amazon EC2 User Guide, "Prerequisites for Amazon EC2 topology", Instance types
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html, checked
2026-11-25). A queue on any other type given the network topology would admit nothing that asks for a
topology level, since no node has the labels.
"""

from __future__ import annotations

SOURCE = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html (2026-11-25)"

# 3 network nodes in the DescribeInstanceTopology response
THREE_LAYERS = (
    "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge",
    "g6e.48xlarge", "g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge", "g7e.48xlarge",
    "hpc6a.48xlarge", "hpc6id.32xlarge", "hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge", "hpc7a.12xlarge",
    "hpc7a.24xlarge", "hpc7a.48xlarge", "hpc7a.96xlarge", "hpc8a.96xlarge",
    "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "p6e-gb200.36xlarge",
    "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge",
)
# 4 network nodes
FOUR_LAYERS = ("p6-b200.48xlarge", "p6-b300.48xlarge")

TOPOLOGY_TYPES = frozenset(THREE_LAYERS + FOUR_LAYERS)


def publishes_topology(instance_type: str) -> bool:
    return instance_type in TOPOLOGY_TYPES
