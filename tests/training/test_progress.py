"""Issue 40: a training run says how it is going. Rank 0 logs one line every --log-every steps on stderr (step,
loss, mean step time since the last line, checkpoint state); stdout's last line stays the result JSON."""

from __future__ import annotations

import re

PROGRESS = re.compile(r"\[rank 0\] .* training INFO step (\d+)/20 loss (\d+\.\d{4}) step_time (\d+\.\d{3})s "
                      r"checkpoint last saved step (\d+|-) \((\d+) committed, (\d+) failed(, writing)?\)$", re.M)


def test_rank_0_logs_progress_every_ten_steps(baseline_run):
    """Failed on the old code: nothing between the start and the result line."""
    lines = PROGRESS.findall(baseline_run.stderr)
    assert [int(m[0]) for m in lines] == [10, 20], baseline_run.stderr[-3000:]
    assert [int(m[3]) for m in lines] == [10, 20]            # checkpoint every 5: the step itself was saved
    assert float(lines[-1][1]) == round(baseline_run.result["loss"], 4)
    assert all(float(m[2]) > 0 for m in lines)
    assert baseline_run.result["step"] == 20                  # the result line was parsed from stdout's last line
