"""Bad configuration is reported clearly and switches off only the check it belongs to."""

from __future__ import annotations

import pytest

from node_agent.config import load_agent_config, load_controller_config


def test_defaults_without_a_file():
    cfg, problems = load_agent_config(None)
    assert problems == [] and cfg.gpu.enabled and cfg.deep_check.dcgm_level == 2


def test_bad_section_disables_only_that_check(tmp_path):
    p = tmp_path / "agent.yaml"
    p.write_text("gpu:\n  interval_seconds: -5\nhost:\n  full_threshold_pct: 90\nefa:\n  sys_rooot: /sys\n"
                 "bogus: 1\n")
    cfg, problems = load_agent_config(p)
    assert not cfg.gpu.enabled and not cfg.efa.enabled
    assert cfg.host.enabled and cfg.host.full_threshold_pct == 90 and cfg.neuron.enabled
    text = "\n".join(problems)
    assert "gpu.interval_seconds: Input should be greater than 0 (got -5)" in text
    assert "efa.sys_rooot: unknown field" in text
    assert "bogus: unknown section" in text
    assert "gpu: check disabled until the config is fixed; other checks keep running" in text


@pytest.mark.parametrize("content,msg", [("gpu: [unclosed", "not valid YAML"), ("- a\n- b\n", "must be a mapping")])
def test_unusable_file_falls_back_to_defaults(tmp_path, content, msg):
    p = tmp_path / "agent.yaml"
    p.write_text(content)
    cfg, problems = load_agent_config(p)
    assert cfg.gpu.enabled and any(msg in x for x in problems)


def test_missing_file(tmp_path):
    cfg, problems = load_agent_config(tmp_path / "nope.yaml")
    assert cfg.host.enabled and "cannot read config" in problems[0]


def test_controller_config_errors_name_the_field(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("budget_max_percent: 250\ngroups:\n  p5: {hot_spares: -1}\n")
    with pytest.raises(ValueError) as e:
        load_controller_config(p)
    assert "budget_max_percent: Input should be less than or equal to 100 (got 250)" in str(e.value)
    assert "groups.p5.hot_spares" in str(e.value)


def test_leader_election_timings_are_checked(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("leader_election:\n  lease_duration_seconds: 5\n  renew_deadline_seconds: 10\n")
    with pytest.raises(ValueError) as e:
        load_controller_config(p)
    assert "leader_election: Value error, need lease_duration_seconds > renew_deadline_seconds" in str(e.value)
    le = load_controller_config(None).leader_election
    assert (le.enabled, le.lease_duration_seconds, le.renew_deadline_seconds, le.retry_period_seconds) == (
        True, 15.0, 10.0, 2.0)
