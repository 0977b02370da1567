"""The workspace's alert manager definition is a valid Alertmanager configuration (checked by the real amtool)."""

from __future__ import annotations

import subprocess

import yaml

from platform_constructs.observability import GROUP_BY, alertmanager_definition

TOPIC = "arn:aws:sns:us-east-2:123456789012:openpod-alerts"


def _config(tmp_path, definition: str):
    outer = yaml.safe_load(definition.replace("${TopicArn}", TOPIC))
    assert list(outer) == ["alertmanager_config"]  # the AMP definition format: one key holding Alertmanager YAML
    path = tmp_path / "alertmanager.yml"
    path.write_text(outer["alertmanager_config"])
    return path, yaml.safe_load(outer["alertmanager_config"])


def test_amtool_accepts_the_alert_manager_definition(amtool, tmp_path):
    path, config = _config(tmp_path, alertmanager_definition("us-east-2"))
    out = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    (receiver,) = config["receivers"]
    assert receiver["sns_configs"] == [{"topic_arn": TOPIC, "sigv4": {"region": "us-east-2"}}]
    assert config["route"]["group_by"] == GROUP_BY


def test_amtool_rejects_a_broken_route(amtool, tmp_path):
    path, _ = _config(tmp_path, alertmanager_definition("us-east-2").replace("receiver: sns", "receiver: nobody"))
    out = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
