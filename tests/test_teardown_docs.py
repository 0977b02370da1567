"""docs/platform.md's teardown order is the one AWS can follow: the retained FSx file system before the stack."""

from __future__ import annotations

from tests.conftest import ROOT


def test_platform_doc_deletes_the_file_system_before_the_stack():
    doc = (ROOT / "docs" / "platform.md").read_text()
    section = doc[doc.index("## Day two: teardown"):doc.index("## Existing VPC")]
    assert "openpod teardown" in section
    fsx, stack = section.index("aws fsx delete-file-system"), section.index("delete-stack")
    assert fsx < stack
    assert "A new deploy with the same spec name creates new ones beside them" not in section


def test_readme_deploys_every_stack_of_the_app():
    readme = (ROOT / "README.md").read_text()
    deploys = [line for line in readme.splitlines() if line.lstrip().startswith("npx cdk deploy")]
    assert deploys and all("--all" in line for line in deploys)
