"""The goodput-at-scale simulation: seeded, self-consistent, and equal to Young/Daly where their model holds."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import goodput_at_scale as g

ROOT = Path(__file__).resolve().parent.parent
ONE_KIND = (("restart-only fault", "-", 1, "process", "crash"),)


def closed_form_costs(interval: float, ckpt: float, restart: float) -> g.Costs:
    """Daly's model: one fault kind, fixed checkpoint cost C, fixed restart R, nothing else."""
    return g.Costs("closed form", "sync", interval, ckpt, restart=restart)


def sim_goodput(costs: g.Costs, *, mtbf_s: float, days: float, seeds: int = 4) -> float:
    results = [g.simulate(costs, accelerators=1, mtbf_hours=mtbf_s / 3600, days=days, seed=s, faults=ONE_KIND,
                          per_node=1) for s in range(seeds)]
    return sum(r.goodput for r in results) / len(results)


@pytest.mark.parametrize("factor", [0.3, 1.0, 3.0])
def test_simulation_matches_daly_exact_form(factor):
    mtbf, ckpt, restart = 3600.0, 60.0, 300.0
    tau = factor * g.young_interval(ckpt, mtbf)
    got = sim_goodput(closed_form_costs(tau, ckpt, restart), mtbf_s=mtbf, days=200)
    want = g.daly_goodput(tau, ckpt, restart, mtbf)
    assert got == pytest.approx(want, abs=0.003), (tau, got, want)


def test_young_interval_is_the_best_of_a_sweep():
    mtbf, ckpt, restart = 3600.0, 30.0, 120.0
    young = g.young_interval(ckpt, mtbf)
    sweep = {f: sim_goodput(closed_form_costs(f * young, ckpt, restart), mtbf_s=mtbf, days=120)
             for f in (0.25, 0.5, 1.0, 2.0, 4.0)}
    assert max(sweep, key=sweep.get) in (0.5, 1.0, 2.0)     # the optimum is flat near sqrt(2CM)
    assert sweep[1.0] > sweep[0.25] + 0.02 and sweep[1.0] > sweep[4.0] + 0.02
    # Daly: the first-order waste at the optimum is sqrt(2C/M) (+ R/M); the simulation agrees
    assert 1 - sweep[1.0] == pytest.approx(math.sqrt(2 * ckpt / mtbf) + restart / mtbf, abs=0.02)


def test_same_seed_same_figures_and_the_ledger_adds_up():
    c = next(c for c in g.strategies(16384, g.mtbf_hours_per_accelerator()) if c.name.startswith("async"))
    a = g.simulate(c, accelerators=16384, mtbf_hours=g.mtbf_hours_per_accelerator(), days=5, seed=3)
    b = g.simulate(c, accelerators=16384, mtbf_hours=g.mtbf_hours_per_accelerator(), days=5, seed=3)
    assert a.seconds == b.seconds and a.interruptions == b.interruptions
    lost_or_done = sum(v for k, v in a.seconds.items() if k != "spares")
    assert lost_or_done == pytest.approx(a.wall, rel=1e-9)
    assert all(v >= -1e-6 for v in a.seconds.values())


def test_the_failure_model_is_the_llama3_run():
    assert sum(f[2] for f in g.FAULTS if f[3] != "planned") == 419      # Table 5 of arXiv:2407.21783
    assert sum(f[2] for f in g.FAULTS) == g.p("interruptions") == 466   # + 47 planned
    assert g.mtbf_hours_per_accelerator() == pytest.approx(54 * 24 * 16384 / 466)
    n = 16384
    c = g.strategies(n, g.mtbf_hours_per_accelerator())[0]
    runs = [g.simulate(c, accelerators=n, mtbf_hours=g.mtbf_hours_per_accelerator(), days=54, seed=s)
            for s in range(3)]
    assert sum(r.interruptions for r in runs) / 3 == pytest.approx(466, rel=0.1)


def test_recovery_strategies_rank_as_their_costs_say():
    rows = g.run((16384,), days=10, seeds=2)
    by = {r["strategy"]: r["goodput"] for r in rows}
    names = list(by)
    sync30, young, sync_spares, tiered, spares, inproc = (by[n] for n in names)
    assert young >= sync30 - 0.005
    assert sync_spares > sync30 and spares > sync_spares   # spares alone, then with tiered checkpoints
    assert tiered > young and spares > tiered and inproc > spares
    assert all(r["share"]["replayed"] < 0.002 for r in rows if r["costs"].mode != "sync")


def test_every_parameter_has_a_kind_and_a_source():
    for name, prm in g.PARAMETERS.items():
        assert prm.kind in {"published", "measured", "code", "derived", "estimate"}, name
        assert prm.source and prm.unit, name


def test_docs_show_the_parameters_and_faults_the_code_uses():
    page = (ROOT / "docs" / "goodput.md").read_text()
    assert g.params_table() in page
    assert g.faults_table() in page
    assert (ROOT / "docs" / "goodput-at-scale.png").stat().st_size > 10_000


@pytest.mark.parametrize("argv, message", [
    (["--days", "0"], "--days: must be positive"),
    (["--set", "nope=1"], "--set nope=1: unknown parameter"),
    (["--set", "step_seconds=x"], "must be a number"),
])
def test_bad_arguments_are_reported(argv, message, capsys):
    assert g.main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_in_process_row_waits_for_hangs_as_long_as_the_codes_default_watchdog():
    """Failed on the old model: it assumed a 30 s watchdog while the launcher's --hang-floor defaults to 300 s."""
    from training.cli import main as cli

    run = cli.commands["run"]
    floor = next(o.default for o in run.params if o.name == "hang_floor")
    assert g.p("watchdog_s") == floor == 300.0 and g.PARAMETERS["watchdog_s"].kind == "code"
    inproc = g.strategies(16384, g.mtbf_hours_per_accelerator())[-1]
    assert inproc.mode == "inprocess" and inproc.detect_hang == floor


def test_the_sensitivity_table_moves_each_estimate_and_only_estimates():
    assert set(g.SENSITIVITY) == {k for k, v in g.PARAMETERS.items() if v.kind == "estimate"}
    rows = g.sensitivity(days=2, seeds=1)
    by = {r["parameter"]: r for r in rows}
    spares = next(n for n in rows[0]["base"] if n.startswith("+ hot spares"))
    assert by["restart_per_node_s"]["at_high"][spares] < by["restart_per_node_s"]["at_low"][spares]
    assert g.PARAMETERS["restart_per_node_s"].value == 0.05   # restored after the run
    page = (ROOT / "docs" / "goodput.md").read_text()
    assert "<!-- goodput:sensitivity -->\n| estimate |" in page and g.measured_here() in page
