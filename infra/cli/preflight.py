"""``openpod preflight`` and ``openpod capacity``: the commands over :mod:`infra.deploy.preflight`."""

from __future__ import annotations

import datetime as dt

import click

from infra.cli.common import emit, load_or_exit, output_option, spec_option
from infra.deploy.preflight import Clients, capacity_offerings, capacity_request, offering_data, preflight, render_offerings


@click.command("preflight")
@spec_option
@output_option()
def preflight_command(spec_path, output="table") -> None:
    """Check the account before a deploy (read-only AWS calls with your credentials); exit 1 on any failure."""
    spec = load_or_exit(spec_path, warn=True)
    findings = preflight(spec, Clients.for_region(spec.region))
    failed = sum(not f.ok for f in findings)
    emit({"region": spec.region, "ok": not failed, "summary": {"ok": len(findings) - failed, "failed": failed},
          "findings": [{"check": f.check, "ok": f.ok, "message": f.message} for f in findings]},
         output, [*(f.line() for f in findings), f"{len(findings) - failed} ok, {failed} failed"])
    raise SystemExit(1 if failed else 0)


@click.command("capacity")
@spec_option
@click.option("--group", required=True, help="the capacity-block instance group to find a block for")
@click.option("--days", type=click.IntRange(1, 182), default=7, show_default=True, help="block duration")
@click.option("--start", type=click.DateTime(["%Y-%m-%d"]), help="earliest start (UTC date; default: now)")
@click.option("--all-zones", is_flag=True, help="also Local Zones you have not opted into (EC2 lists only "
                                                "opted-in ones otherwise)")
@output_option()
def capacity_command(spec_path, group, days, start, all_zones=False, output="table") -> None:
    """List Capacity Block offerings for a group and print the spec lines to use once one is bought."""
    spec = load_or_exit(spec_path, warn=True)
    names = [g.name for g in spec.instance_groups]
    if group not in names:
        raise click.UsageError(f"--group: no instance group {group!r}; groups: {', '.join(names)}")
    g = spec.group(group)
    start = (start or dt.datetime.now(dt.timezone.utc)).replace(tzinfo=dt.timezone.utc)
    ec2 = Clients.for_region(spec.region).ec2   # boto3 missing: one line (MainGroup), not an API failure
    try:
        offers = capacity_offerings(ec2, g, start, days, all_zones=all_zones)
    except Exception as e:
        raise click.ClickException(f"describe-capacity-block-offerings failed: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0]}") from None
    request = capacity_request(g, start, days, all_zones=all_zones)
    emit({"group": g.name, "instance_type": g.instance_type, "instance_count": g.max_size, "region": spec.region,
          "ultraserver_type": request.get("UltraserverType"), "ultraserver_count": request.get("UltraserverCount"),
          "days": days, "offerings": [offering_data(o) for o in offers]}, output, render_offerings(spec, g, offers))
