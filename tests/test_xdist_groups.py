"""CI's scheduling: `pytest -n 3 --dist loadgroup` keeps an xdist_group on one worker (the cdk tests share their
synthesized apps that way). pytest 9.2 broke this silently (pytest-dev/pytest-xdist#1386): the pin in
pyproject.toml keeps pytest below it, and this test fails if a version that drops the groups is installed."""

import re
import subprocess
import sys


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.xdist_group('one')\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_member(i):\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
                        "-p", "no:randomly", "test_grouped.py"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout[-2000:]
    workers = re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED test_grouped.py::test_member\[\d\]", r.stdout)
    assert len(workers) == 6, r.stdout[-2000:]
    assert len(set(workers)) == 1, f"the group was split over {sorted(set(workers))}"
