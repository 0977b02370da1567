"""Issue 40: `openpod schema` prints the spec's JSON Schema for editors: a valid draft 2020-12 schema that the
examples satisfy and that flags what the spec model refuses field by field."""

from __future__ import annotations

import json

import jsonschema
import yaml
from click.testing import CliRunner

from infra.cli.main import main
from tests.conftest import EXAMPLES


def _schema() -> dict:
    r = CliRunner().invoke(main, ["schema"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_the_schema_is_valid_and_the_examples_satisfy_it():
    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    for name in ("default.yaml", "large.yaml"):
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load((EXAMPLES / name).read_text())))
        assert not errors, (name, [e.message for e in errors[:3]])


def test_the_schema_flags_an_unknown_field_and_a_wrong_type():
    validator = jsonschema.Draft202012Validator(_schema())
    spec = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    assert list(validator.iter_errors({**spec, "nmae": "x"}))
    assert list(validator.iter_errors({**spec, "instance_groups": [{**spec["instance_groups"][0], "max_size": "four"}]}))
