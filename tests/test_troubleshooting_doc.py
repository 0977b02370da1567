"""Issue 40: docs/troubleshooting.md lists the errors users meet; each entry's heading is a literal part of a
message the code prints, so a reworded message fails here until the page follows it."""

from __future__ import annotations

import re

from tests.conftest import ROOT

DOC = ROOT / "docs" / "troubleshooting.md"
SOURCES = [p for pkg in ("infra", "training", "node_agent", "observability", "openpod_core")
           for p in (ROOT / pkg).rglob("*.py")] + [ROOT / "cdk.json", ROOT / "Makefile", ROOT / "app.py"] + sorted(
    (ROOT / "infra" / "cli" / "scaffold").glob("*.tmpl"))
HEADING = re.compile(r"^### (`+)(.+?)\1$", re.M)


def test_each_listed_error_is_a_message_of_the_code():
    code = "\n".join(p.read_text() for p in SOURCES)
    headings = [m.group(2).strip() for m in HEADING.finditer(DOC.read_text())]
    assert len(headings) >= 20, headings
    missing = [h for h in headings if h not in code]
    assert not missing, f"docs/troubleshooting.md names messages the code no longer prints: {missing}"


def test_each_entry_says_cause_and_fix():
    for entry in re.split(r"^### ", DOC.read_text(), flags=re.M)[1:]:
        assert "**Cause" in entry and "Fix:**" in entry, entry.splitlines()[0]
