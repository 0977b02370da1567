"""openpod_core/regions.py and openpod_core/cloudwatch.py against the installed engines they were read from."""

from __future__ import annotations

import json
import re
from pathlib import Path

import botocore
import botocore.loaders

from openpod_core.cloudwatch import LOG_RETENTION_DAYS
from openpod_core.regions import AZ_LETTERS, REGIONS


def test_regions_are_botocores_commercial_china_and_govcloud_regions():
    endpoints = json.loads((Path(botocore.__file__).parent / "data" / "endpoints.json").read_text())
    known = {r for p in endpoints["partitions"] if p["partition"] in ("aws", "aws-cn", "aws-us-gov")
             for r in p["regions"]}
    assert botocore.__version__ == "1.44.8"
    assert REGIONS == known


def test_az_letters_are_motos_recorded_zones():
    from moto.ec2.models import availability_zones_and_regions as m

    zones = m.RegionsAndZonesBackend.zones
    assert AZ_LETTERS == {r: "".join(sorted(z.name[len(r):] for z in zones[r])) for r in AZ_LETTERS}
    # only the Regions moto records by hand (its table ends before the a-c guess for the others)
    source = Path(m.__file__).read_text().splitlines()[82:187]
    recorded = {g for line in source if (g := (re.match(r'^        "([a-z0-9-]+)": \[', line) or [None, None])[1])}
    assert set(AZ_LETTERS) == recorded


def test_log_retention_days_are_cloudwatchs():
    model = botocore.loaders.create_loader().load_service_model("logs", "service-2")
    doc = model["shapes"]["Days"]["documentation"]
    listed = tuple(int(n) for n in re.findall(r"\d+", doc.split("Possible values are:")[1].split("</p>")[0]))
    assert LOG_RETENTION_DAYS == listed
