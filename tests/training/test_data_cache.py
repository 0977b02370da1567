"""The data-loader cache's settings. That a restarted worker maps the data set's shards from node memory, and ends
bit-identical, is shown by tests/training/test_resume.py::test_killed_and_resumed_run_matches_the_uninterrupted_one
(the shared shard files are removed after its first incarnation)."""


def test_data_cache_gib_0_turns_it_off_and_a_negative_size_is_a_usage_error(tmp_path):
    from training.cli import check_run_args

    base = ["--checkpoint-dir", str(tmp_path / "ck"), "--steps", "5"]
    assert check_run_args([*base, "--data-cache-gib", "0"]) == []
    assert check_run_args([*base, "--data-cache-gib", "-1"]) == ["--data-cache-gib: must be >= 0 (0: off), got -1.0"]


def test_the_default_cache_size_follows_the_containers_memory_limit():
    from training.cli import default_data_cache_gib

    assert 0 < default_data_cache_gib() <= 16
