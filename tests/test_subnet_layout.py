"""Subnet ranges that never move when an AZ is added (EC2 refuses overlapping subnets: fact ec2.subnet.cidr-conflict).

The recorded ranges are those every earlier version deployed, read from the examples' synthesized
templates before the stable layout (tests/cdk/__snapshots__ at ca277c7: default 2 AZs in 10.0.0.0/16,
large 3 AZs in 10.64.0.0/16).
"""

from __future__ import annotations

import ipaddress

import pytest

from platform_constructs.network import subnet_layout

DEPLOYED = {
    ("10.0.0.0/16", 2): [("10.0.0.0/18", "10.0.128.0/24"), ("10.0.64.0/18", "10.0.129.0/24")],
    ("10.64.0.0/16", 3): [("10.64.0.0/19", "10.64.96.0/24"), ("10.64.32.0/19", "10.64.97.0/24"),
                          ("10.64.64.0/19", "10.64.98.0/24")],
}


@pytest.mark.parametrize("cidr,n", sorted(DEPLOYED))
def test_the_layout_of_a_deployed_platform_is_the_one_it_was_deployed_with(cidr, n):
    assert subnet_layout(cidr, n) == DEPLOYED[(cidr, n)]


@pytest.mark.parametrize("cidr,n", sorted(DEPLOYED))
def test_adding_azs_keeps_every_live_range_and_adds_non_overlapping_ones(cidr, n):
    for more in range(1, 2 if n == 2 else 5):     # room left: one more /18, four more /19s
        layout = subnet_layout(cidr, n + more, layout_azs=n)
        assert layout[:n] == DEPLOYED[(cidr, n)]
        blocks = [ipaddress.ip_network(b) for pair in layout for b in pair]
        assert all(not a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1:])
        assert all(b.subnet_of(ipaddress.ip_network(cidr)) for b in blocks)


def test_the_old_re_split_would_have_moved_live_subnets():
    """What the layout prevents: re-splitting for the new AZ count re-addresses the live subnets."""
    old = DEPLOYED[("10.0.0.0/16", 2)]
    resplit = subnet_layout("10.0.0.0/16", 3)       # layout made for 3 AZs: the pre-fix behaviour
    assert resplit[0][0] != old[0][0]
    assert ipaddress.ip_network(resplit[2][0]).overlaps(ipaddress.ip_network(old[1][0]))


def test_a_full_vpc_and_a_bad_layout_count_are_clear_errors():
    with pytest.raises(ValueError, match="no free /18"):
        subnet_layout("10.0.0.0/16", 4, layout_azs=2)
    with pytest.raises(ValueError, match="layout_azs must be 1..2"):
        subnet_layout("10.0.0.0/16", 2, layout_azs=3)
