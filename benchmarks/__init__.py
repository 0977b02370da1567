"""Benchmarks: scripts that measure side by side in one run and print a report (not timed tests)."""
