"""The facts register: well-formed rows in every table, the register holds them all, rendered docs current,
`openpod facts` prints it."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import pkgutil
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from infra.cli.main import main
from infra.cli.docs import PAGES
import openpod_core.facts
from openpod_core.facts.register import FACTS, TABLES, fact

ROOT = Path(__file__).resolve().parents[1]
SOURCE = re.compile(r"^(https://\S+|[\w.-]+/[\w.-]+@[\w.+-]+:\S+|gitlab\.com/\S+)")
# The package's modules that hold no table of facts; every other module is one table (FACTS).
NOT_TABLES = {"record", "register", "unverified"}
MODULES = {m.name: importlib.import_module(f"openpod_core.facts.{m.name}")
           for m in pkgutil.iter_modules(openpod_core.facts.__path__)}
TABLE_FACTS = [f for name, mod in sorted(MODULES.items()) if name not in NOT_TABLES
               for f in getattr(mod, "FACTS", ())]


def test_every_table_module_is_in_the_register():
    """A new table the register does not join would be checked here but missing from lookups and docs/facts.md."""
    tables = {name: mod for name, mod in MODULES.items() if name not in NOT_TABLES}
    assert all(isinstance(getattr(mod, "FACTS", None), tuple) for mod in tables.values()), \
        [name for name, mod in tables.items() if not isinstance(getattr(mod, "FACTS", None), tuple)]
    assert sorted(m.__name__ for m in TABLES) == sorted(m.__name__ for m in tables.values())
    assert sorted(f.key for f in FACTS) == sorted(f.key for f in TABLE_FACTS)


@pytest.mark.parametrize("f", TABLE_FACTS, ids=lambda f: f.key)
def test_every_fact_has_a_source_and_a_check_date(f):
    assert f.value.strip(), f.key
    assert SOURCE.match(f.source), f"{f.key}: source must be a URL or owner/repo@tag:path, got {f.source!r}"
    assert dt.date.fromisoformat(f.checked) <= dt.date.today()


def test_an_unknown_key_names_the_known_ones():
    with pytest.raises(KeyError, match="aws-ofi-nccl.version"):
        fact("no-such-fact")


@pytest.mark.parametrize("page", sorted(PAGES))
def test_generated_docs_are_current(page):
    assert (ROOT / "docs" / page).read_text() == PAGES[page](), f"docs/{page} is stale: run `python -m infra docs`"


def test_openpod_facts_prints_every_row_with_its_source():
    out = CliRunner().invoke(main, ["facts", "--json"])
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.output.splitlines()]
    assert [r["key"] for r in rows] == [f.key for f in FACTS]
    assert all(r["source"] and r["checked"] for r in rows)


def test_openpod_facts_as_one_document():
    import yaml

    out = CliRunner().invoke(main, ["facts", "-o", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert [r["key"] for r in data["facts"]] == [f.key for f in FACTS]
    assert data["facts"][0] == json.loads(CliRunner().invoke(main, ["facts", "--json"]).stdout.splitlines()[0])
    assert yaml.safe_load(CliRunner().invoke(main, ["facts", "-o", "yaml"]).stdout) == data
    assert CliRunner().invoke(main, ["facts", "-o", "table"]).stdout == CliRunner().invoke(main, ["facts"]).stdout
    bad = CliRunner().invoke(main, ["facts", "--json", "-o", "yaml"])
    assert bad.exit_code == 2 and bad.stderr.splitlines() == ["error: --json (JSON Lines) and -o yaml are exclusive"]


def test_the_fsx_rules_of_the_spec_and_construct_are_the_api_references():
    """storage.fsx.throughput_per_tib / metadata_iops accept exactly what the FSx API reference lists."""
    import typing

    from infra.spec.storage import FsxSpec
    from platform_constructs.lustre import THROUGHPUTS

    listed = tuple(int(v) for v in fact("fsx.lustre.persistent2-throughputs").value.split(", "))
    assert THROUGHPUTS == listed
    assert typing.get_args(FsxSpec.model_fields["throughput_per_tib"].annotation) == listed
    iops = [1500, 3000, 6000, 12000, *range(24000, 192001, 12000)]
    assert "1500, 3000, 6000, 12000 and multiples of 12000 up to 192000" == fact("fsx.lustre.metadata-iops").value
    for v in iops:
        FsxSpec(metadata_iops=v)
    for v in (1000, 18000, 204000):
        with pytest.raises(ValueError):
            FsxSpec(metadata_iops=v)
