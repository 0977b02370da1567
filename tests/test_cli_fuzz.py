"""Issue 29: no traceback from any CLI on bad input or unreachable services, and nothing written on failure.

A seeded, bounded fuzz over `openpod`'s and `python -m training run`'s arguments and input files: each command
gets random option subsets drawn from pools of good, odd and hostile values (binary, UTF-16, /dev/zero, garbage
kubeconfigs and templates, empty paths, huge numbers) against an unreachable API server and AWS endpoint.
Every run must end in a usage error, a clean failure or success - never an uncaught exception - and a failed run
must leave the files as they were. Runs in-process (CliRunner): a few seconds for the whole corpus.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import EXAMPLES

SEED = 29
RUNS_PER_COMMAND = 20
TRAINING_RUNS = 60

UNREACHABLE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def _corpus(root: Path) -> dict[str, list[str]]:
    """Input files: good ones and hostile ones, by what they stand for."""
    f = root / "inputs"
    f.mkdir()
    files = {
        "binary.yaml": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)),
        "utf16.yaml": "name: x\n".encode("utf-16"),
        "garbage.yaml": b"name: [unclosed\n\t- {",
        "string.yaml": b"just a string\n",
        "list.yaml": b"- 1\n- 2\n",
        "dupkeys.yaml": (EXAMPLES / "default.yaml").read_bytes() + b"\nname: again\n",
        "empty.yaml": b"",
        "huge.yaml": b"#" * (1 << 20) + b"\n",
        "kube-unreachable.yaml": UNREACHABLE_KUBECONFIG.encode(),
        "log.txt": b"#  size  count  type  redop  root  time  algbw  busbw\n 8 2 float sum -1 1.0 1.0 1.0\n",
    }
    for name, data in files.items():
        (f / name).write_bytes(data)
    (f / "a-dir").mkdir()
    for name in ("tmpl-garbage", "tmpl-list", "tmpl-empty"):
        (f / name).mkdir()
    (f / "tmpl-garbage" / "x.template.json").write_text("{garbage")
    (f / "tmpl-list" / "openpod-dev.template.json").write_text("[1, 2]")
    (f / "tmpl-empty" / "manifest.json").write_bytes(b"\x00\x01")
    good = [str(EXAMPLES / "default.yaml"), str(EXAMPLES / "large.yaml")]
    bad = [str(f / n) for n in files if n.endswith(".yaml")] + [str(f / "a-dir"), str(f / "missing.yaml"), "",
                                                                "/dev/null", "/dev/zero", "/dev/urandom"]
    return {
        "spec": good * 8 + bad,
        "kubeconfig": [str(f / "kube-unreachable.yaml")] * 3 + bad,
        "template": [str(f / n) for n in ("tmpl-garbage", "tmpl-list", "tmpl-empty", "a-dir", "missing")] + [""],
        "log": [str(f / "log.txt"), *bad],
        "out": [str(root / "out"), str(root / "out" / "deeper"), str(f / "log.txt"), str(f / "log.txt" / "x"), ""],
    }


INTS = ["-1", "0", "1", "2", "3", "4", "99999999999999999999", "abc", "", "1.5"]
WORDS = ["", "p5", "gb200", "system", "research", "nope", "ü", "../../etc/passwd", "a" * 300, "-x", "UPPER"]


def _value(kind: str, rng: random.Random, corpus: dict[str, list[str]]) -> str:
    if kind in corpus:
        return rng.choice(corpus[kind])
    if kind == "int":
        return rng.choice(INTS)
    if kind == "float":
        return rng.choice(INTS + ["0.01", "nan", "inf"])
    if isinstance(kind, tuple):
        return rng.choice(list(kind) + ["bogus"])
    return rng.choice(WORDS)


# command -> (fixed leading args, {option: kind}); kind None = a flag
COMMANDS = {
    "validate": (["validate"], {"--spec": "spec", "-o": ("table", "json", "yaml")}),
    "manifests": (["manifests"], {"--spec": "spec", "--out": "out"}),
    "queues": (["queues"], {"--spec": "spec", "--live": None, "--kubeconfig": "kubeconfig", "-o": ("json", "yaml")}),
    "submit": (["submit"], {"--spec": "spec", "--name": "word", "--team": ("research", "product"),
                            "--group": ("p5", "trn2", "gb200", "system"), "--image": "word", "--nodes": "int",
                            "--priority": ("training", "inference"), "--accelerators-per-node": "int",
                            "--runtime": ("torchrun", "openpod"), "--replicas": "int", "--env": "word",
                            "--grace-seconds": "int", "--hugepages": "int", "--shm": "int",
                            "--require-topology": "word", "--dry-run": None, "--kubeconfig": "kubeconfig"}),
    "rules": (["rules"], {"--spec": "spec", "--out": "out"}),
    "dashboards": (["dashboards"], {"--out": "out"}),
    "drain": (["drain"], {"--spec": "spec", "--group": ("p5", "trn2"), "--timeout": "int", "--poll": "float",
                          "--undo": None, "--kubeconfig": "kubeconfig"}),
    "pair-check render": (["pair-check", "render"], {"--spec": "spec", "--group": ("p5", "system", "trn2"),
                                                    "--nodes": "word", "--image": "word",
                                                    "--tool": ("nccl-tests", "torch")}),
    "pair-check decide": (["pair-check", "decide"], {"--spec": "spec", "--group": ("p5", "trn2"),
                                                    "-o": ("table", "json", "yaml")}),
    "plan": (["plan"], {"--spec": "spec", "--base-template": "template", "--json": None, "--markdown": None,
                        "--allow-replace": "word", "-o": ("table", "json", "yaml")}),
    "jobs list": (["jobs", "list"], {"--team": "word", "--kubeconfig": "kubeconfig"}),
    "jobs logs": (["jobs", "logs", "x"], {"--team": "word", "--tail": "int", "--kubeconfig": "kubeconfig"}),
    "preflight": (["preflight"], {"--spec": "spec", "-o": ("table", "json", "yaml")}),
    "capacity": (["capacity"], {"--spec": "spec", "--group": ("gb200", "p5"), "--days": "int",
                          "-o": ("table", "json", "yaml")}),
}


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _invoke(cli, args: list[str], env: dict) -> tuple[object, str]:
    r = CliRunner().invoke(cli, args, env=env)
    return r, r.output


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kube = tmp_path / "kubeconfig"
    kube.write_text(UNREACHABLE_KUBECONFIG)
    return {"KUBECONFIG": str(kube), "AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x", "AWS_MAX_ATTEMPTS": "1", "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_DEFAULT_REGION": "us-east-2", "HOME": str(tmp_path)}


@pytest.mark.slow   # ~8 s on an idle 2-core box, most of it preflight's boto3 clients
def test_openpod_never_tracebacks_and_writes_nothing_on_failure(tmp_path, env, record_property):
    from infra.cli.main import main

    corpus = _corpus(tmp_path)
    rng = random.Random(SEED)
    runs, codes = 0, {}
    for name, (lead, options) in COMMANDS.items():
        for _ in range(RUNS_PER_COMMAND):
            args = list(lead)
            for opt, kind in options.items():
                if rng.random() < 0.6:
                    args += [opt] if kind is None else [opt, _value(kind, rng, corpus)]
            if name == "plan":
                args += ["--template", _value("template", rng, corpus)]   # never synthesize in a fuzz run
            if name == "pair-check decide":
                args += [_value("log", rng, corpus)]
            if name == "submit":
                args += ["--", "train.py"]
            before = _snapshot(tmp_path)
            r, out = _invoke(main, args, env)
            runs += 1
            codes[r.exit_code] = codes.get(r.exit_code, 0) + 1
            assert r.exception is None or isinstance(r.exception, SystemExit), (args, out[-2000:], r.exc_info)
            assert "Traceback" not in out, (args, out[-2000:])
            assert r.exit_code in (0, 1, 2, 3), (args, r.exit_code, out[-2000:])
            if r.exit_code:
                assert _snapshot(tmp_path) == before, (args, _snapshot(tmp_path) - before)
            else:
                shutil.rmtree(tmp_path / "out", ignore_errors=True)
    record_property("fuzz_runs", runs)
    print(f"openpod fuzz: {runs} runs, exit codes {dict(sorted(codes.items()))}")
    assert runs == RUNS_PER_COMMAND * len(COMMANDS)


class Launched(Exception):
    """The arguments were accepted: the launcher would start workers now."""


def test_training_run_never_tracebacks_before_launching(tmp_path, env, monkeypatch, record_property):
    import training.cli as tcli
    import training.ft.inprocess as inprocess

    def launched(*a, **k):
        raise Launched()

    monkeypatch.setattr(tcli, "_supervise", launched)
    monkeypatch.setattr(tcli, "wait_for_lighthouse", launched)
    monkeypatch.setattr(inprocess, "supervise_ranks", launched)
    corpus = _corpus(tmp_path)
    options = {"--steps": "int", "--checkpoint-every": "int", "--nproc-per-node": "int", "--global-batch": "int",
               "--micro-batch": "int", "--num-samples": ("64", "512"), "--data-dir": "out", "--keep": "int",
               "--metrics-port": "int", "--nnodes": ("1", "1:2", "2", "x", "3:1"), "--rdzv-endpoint": "word",
               "--parallelism": ("ddp", "fsdp", "hsdp"), "--shard-size": "int", "--tp": "int",
               "--hang-floor": "float", "--stop-timeout": "int", "--fault-tolerance": ("restart", "replica"),
               "--restart": ("process", "in-process"), "--replicas": "int", "--replica-id": "int",
               "--s3-uri": "word", "--data-cache-gib": "float", "--memory-dir": "out"}
    rng = random.Random(SEED)
    runs, codes = 0, {}
    for _ in range(TRAINING_RUNS):
        args = ["run", "--model", "tiny", "--checkpoint-dir",
                rng.choice([str(tmp_path / "ck"), "", str(tmp_path / "inputs" / "log.txt"), "/proc/x"])]
        for opt, kind in options.items():
            if rng.random() < 0.25:
                args += [opt, _value(kind, rng, corpus)]
        if "--steps" not in args:
            args += ["--steps", "1"]
        before = _snapshot(tmp_path)
        r = CliRunner().invoke(tcli.main, args, env=env)
        runs += 1
        codes[r.exit_code] = codes.get(r.exit_code, 0) + 1
        ok = r.exception is None or isinstance(r.exception, (SystemExit, Launched))
        assert ok, (args, r.output[-2000:], r.exc_info)
        assert "Traceback" not in r.output, (args, r.output[-2000:])
        if r.exit_code == 2:
            assert _snapshot(tmp_path) == before, (args, _snapshot(tmp_path) - before)
        shutil.rmtree(tmp_path / "ck", ignore_errors=True)
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
    record_property("fuzz_runs", runs)
    print(f"training fuzz: {runs} runs, exit codes {dict(sorted(codes.items()))}")
    assert os.path.isdir(tmp_path)
