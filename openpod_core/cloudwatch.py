"""CloudWatch Logs' retention settings: the only day counts ``PutRetentionPolicy`` accepts.

Source: boto/botocore@1.44.8:botocore/data/logs/2014-03-28/service-2.json, shape ``Days`` ("Possible values
are: 1, 3, 5, ... and 3653"); checked 2026-11-28 (fact ``logs.retention-days``; tests/test_log_retention.py reads
the installed model and compares).
"""

from __future__ import annotations

LOG_RETENTION_DAYS: tuple[int, ...] = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827,
                                       2192, 2557, 2922, 3288, 3653)
