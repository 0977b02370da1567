"""Docs rendered from the project's data tables (single source of truth)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from openpod_core.files import write_text_atomic
from openpod_core.instance_types import INSTANCE_TYPES


def instance_types_md() -> str:
    rows = [
        "# Instance types",
        "",
        "Generated from `openpod_core/instance_types.py` by `python -m infra docs`; do not edit by hand.",
        "",
        "| type | arch | vCPU | memory GiB | accelerators | accel. memory GiB | network cards | EFA cards "
        "| EFA Gbps/card | network Gbps | EFA layout | NVMe | UltraServer |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in INSTANCE_TYPES.values():
        accel = f"{t.accelerator_count}x {t.accelerator_model}" if t.is_accelerated else "-"
        nvme = f"{t.nvme_count}x {t.nvme_gb} GB" if t.nvme_count else "-"
        ultra = f"{t.ultraserver.name} ({t.ultraserver.instances})" if t.ultraserver else "-"
        rows.append(
            f"| {t.name} | {t.arch} | {t.vcpus} | {t.memory_gib} | {accel} | {t.accelerator_memory_gib or '-'} "
            f"| {t.network_cards} | {t.efa_count or '-'} | {t.efa_gbps_per_card or '-'} | {t.network_gbps} "
            f"| {t.efa_layout.value} | {nvme} | {ultra} |"
        )
    return "\n".join(rows) + "\n"


def facts_md() -> str:
    from openpod_core.facts.register import FACTS
    from openpod_core.facts.unverified import UNVERIFIED

    rows = [
        "# Facts register",
        "",
        "Every external fact the platform relies on, with its source and the date it was last checked against it.",
        "Generated from `openpod_core/facts/` by `python -m infra docs` (also: `openpod facts`); do not edit by hand.",
        "",
        "| fact | value | source | checked | note |",
        "|---|---|---|---|---|",
    ]
    for f in FACTS:
        cells = (f.key, f.value, f.source, f.checked, f.note)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    rows += ["", "## Not yet verified", "", "What the code assumes where no source has been read yet.", "",
             "| fact | what the code assumes |", "|---|---|"]
    rows += [f"| {what} | {assumed} |" for what, assumed in UNVERIFIED]
    return "\n".join(rows) + "\n"


def _spec_md() -> str:
    from infra.spec.docs import spec_md

    return spec_md()


def _node_agent_rules_md() -> str:
    from node_agent.rules import rules_markdown

    return rules_markdown()


def _prometheus_rules_yaml() -> str:
    from observability.rules import rules_yaml

    return rules_yaml()


def _observability_md() -> str:
    from observability.docs import observability_md

    return observability_md()


def _runbooks_md() -> str:
    from observability.runbooks import runbooks_md

    return runbooks_md()


# name -> renderer; other packages add their generated pages here.

PAGES: dict[str, Callable[[], str]] = {
    "instance-types.md": instance_types_md,
    "facts.md": facts_md,
    "spec.md": _spec_md,
    "node-agent-rules.md": _node_agent_rules_md,
    "prometheus-rules.yaml": _prometheus_rules_yaml,
    "observability.md": _observability_md,
    "runbooks.md": _runbooks_md,
}


def write_atomic(path: Path, text: str) -> None:
    """Write a file so a crash never leaves it half-written (with the user's umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)


def write_all(out: Path) -> list[Path]:
    written = []
    for name, render in PAGES.items():
        write_atomic(out / name, render())
        written.append(out / name)
    return written
