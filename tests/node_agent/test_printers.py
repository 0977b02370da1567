"""The printer catalog (node_agent/catalog/printers.csv): every row, rendered with random variable parts in every
log format the agent reads, is classified by its rule (and a "-" row by none), through the live engine."""

from __future__ import annotations

import random
import re

import pytest

from node_agent.findings import Action
from node_agent.kernel_engine import KernelLogEngine
from node_agent.printers import PRINTERS, coverage, record, render, rows_of
from node_agent.rules import KERNEL_RULES, RULES
from tests.node_agent.test_injection import FORMATS

SEEDS = range(4)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("p", PRINTERS, ids=lambda p: p.id)
def test_every_printer_renders_and_its_rule_matches_in_every_format(p, fmt):
    for seed in SEEDS:
        rng = random.Random(f"{p.id}/{fmt}/{seed}")
        engine = KernelLogEngine()
        *context, line = [fmt.format(m=x) for x in record(p, rng)]
        for c in context:
            engine.feed(c)
        f = engine.feed(line)
        if p.rule == "-":
            assert f is None or f.action is Action.NONE, (line, f and f.rule)
        else:
            assert f is not None and f.rule == p.rule, (line, f and f.rule)


# owner/repo@tag-or-commit:path:line (or a line range), then notes: every row is pinned to a version and a line
_PINNED = re.compile(r"[\w.-]+/[\w.-]+@[\w.]+:[^\s:]+:\d+(?:-\d+)?(?: \(|$)")


def test_catalog_rows_name_real_rules_sources_and_user_text():
    ids = [p.id for p in PRINTERS]
    assert len(ids) == len(set(ids))
    for p in PRINTERS:
        assert p.rule == "-" or p.rule in RULES, p.id
        assert _PINNED.match(p.source) and p.why and p.user_text, (p.id, p.source)
    assert all(p.rule == "-" for p in PRINTERS if p.subsystem == "user-fault")


def test_rules_name_their_rows_and_coverage_adds_up():
    assert rows_of("gpu-init-failed") and rows_of("cper-pcie-uncorrected") == ("cper-section-pcie",)
    named = {r.id for r in KERNEL_RULES if rows_of(r.id)}
    assert {"mce-fatal", "mce-uncorrected-fatal", "memory-failure", "cper-memory-uncorrected",
            "gpu-reset-required-status", "xid-79"} <= named
    assert sum(c[1] for c in coverage()) == len(PRINTERS)


def test_render_binds_and_randomises():
    rng = random.Random(1)
    out = render("CPU %d: Machine Check%s: %Lx Bank %d: %016Lx", rng, {1: " Exception", 4: "be00000000800400"})
    assert " Exception: " in out and out.endswith("be00000000800400")
    assert render("%#lx %04x %px 100%%", rng).count("0x") >= 1 and "%" in render("100%%", rng)


def test_candidate_printers_are_listed_from_a_checkout_at_a_tag(tmp_path, capsys):
    """tools/printer_candidates.py on a tiny repository shaped like the driver's: error printers whose format
    has a failure word, with the catalog rows that hold them and the engine's verdict on each held one rendered
    from its own format; info-level and harmless printers are left out. A held printer a branch reworded so that
    no rule classes it (the row's text inside it, "Waiting for " before) is held but not classified, and named;
    osapi.c's three-line nv_printf is three kernel records, its last one judged."""
    import subprocess

    from tools.printer_candidates import main

    src = tmp_path / "src"
    src.mkdir()
    (src / "osinit.c").write_text(
        'NV_PRINTF(LEVEL_ERROR, "*** Cannot attach gpu\\n");\n'
        'NV_PRINTF(LEVEL_INFO, "osInitNvMapping:\\n");\n'
        'NV_PRINTF(LEVEL_ERROR, "Timeout waiting for lockdown release. It\'s also "\n'
        '                       "possible that bootrom may have failed.\\n");\n'
        'NV_PRINTF(LEVEL_ERROR, "a brand new branch failed to boot: 0x%x\\n", status);\n'
        'NV_PRINTF(LEVEL_ERROR, "RmInitNvHal() failed, bailing out of RmInitAdapter!\\n");\n'
        'NV_PRINTF(LEVEL_ERROR, "Waiting for FSP boot cmds failed. RM cannot boot.\\n");\n'
        'nv_printf(NV_DBG_ERRORS, "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\\n"\n'
        '          "NVRM: (PCI ID: %04x:%04x) installed in this system has\\n"\n'
        '          "NVRM: fallen off the bus and is not responding to commands.\\n", d, b, s, f, v, i);\n')
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"], ["tag", "570.0"]):
        subprocess.run(git + args, check=True, capture_output=True)
    assert main([str(tmp_path), "570.0", "src/osinit.c"]) == 0
    out = capsys.readouterr()
    rows = out.out.splitlines()[1:]
    assert len(rows) == 6, out
    assert "6 candidate printers, 5 held by a catalog row, 4 classified by the engine as the row says" in out.err
    assert rows[0].endswith(",nv-cannot-attach,ok") and "nv-lockdown" in rows[1] and rows[1].endswith(",ok")
    assert rows[2].endswith(",,") and rows[3].endswith(",ok") and rows[5].endswith(",nv-fallen-off-bus-probe,ok")
    assert rows[4].endswith(",nv-fsp-boot-cmds,nv-fsp-boot-cmds=none")
    assert "misclassified: src/osinit.c:7 'Waiting for FSP boot cmds failed" in out.err
    assert main([str(tmp_path), "no-such-tag", "src/osinit.c"]) == 2


def test_the_docs_coverage_table_is_the_catalogs():
    from pathlib import Path

    from node_agent.printers import coverage_markdown

    page = (Path(__file__).resolve().parents[2] / "docs" / "node-agent.md").read_text()
    assert coverage_markdown() in page


def _tree(root, files: dict[str, str]) -> None:
    """``files`` (path -> text) written under ``root``: a source tree for tools/printer_candidates.py --dir."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_candidate_printers_are_listed_from_a_plain_source_directory(tmp_path, capsys):
    """--dir reads an unpacked tree (a kernel tarball): Linux error printers with their level (pr_emerg, printk
    KERN_ERR, cper.c's caller-given pfx, ibdev_err_ratelimited), a "%s<word>" format is not taken for a bare
    conversion (it named every row once) and cper.c's generic "%serror_type: %d, %s" is judged as the row that
    names one case of it, a Linux row counts only in the file it cites (ena_com.c prints efa_com.c's texts), and a
    missing file is one line, not a traceback."""
    from tools.printer_candidates import main

    files = {"kernel/watchdog.c": 'pr_emerg("Watchdog detected hard LOCKUP on cpu %d\\n", cpu);\n'
                                  'printk(KERN_INFO "lockup detector enabled\\n");\n',
             "drivers/firmware/efi/cper.c": 'printk("%s""error_type: %d, %s\\n", pfx, etype, str(etype));\n'
                                            'printk("%srequest timed out\\n", pfx);\n',
             "drivers/infiniband/hw/efa/efa_com.c":
                 'ibdev_err_ratelimited(aq->efa_dev, "Reset indication didn\'t turn on\\n");\n',
             "drivers/net/ethernet/amazon/ena/ena_com.c":
                 'netdev_err(ena_dev->net_device, "Reset indication didn\'t turn on\\n");\n'}
    _tree(tmp_path, files)
    assert main(["--dir", str(tmp_path), *files]) == 0
    out = capsys.readouterr()
    rows = out.out.splitlines()[1:]
    assert len(rows) == 5, out
    assert "5 candidate printers, 3 held by a catalog row, 3 classified by the engine as the row says" in out.err
    assert rows[0].endswith(",hard-lockup,ok") and rows[1].endswith(",cper-mem-multibit,ok")
    assert rows[2].endswith(",,") and rows[3].endswith(",efa-reset-on,ok") and rows[4].endswith(",,")
    assert main(["--dir", str(tmp_path), "kernel/nope.c"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_warning_level_printers_are_listed_with_level_warning(tmp_path, capsys):
    """--level warning lists the warning-level calls (dev_warn, pr_warn_ratelimited, printk KERN_WARNING, WARN()'s
    format, ext4_warning; every format here, --grep .) instead of the error-level ones, with the same rows and
    engine verdicts: nvme's "IO queues
    lost" is held and classified; a generic ext4_warning_inode wrapper whose constant text a row holds is held but
    not classified (the text test's false positive, named)."""
    from tools.printer_candidates import main

    files = {"drivers/nvme/host/pci.c": 'dev_warn(dev->ctrl.device, "IO queues lost\\n");\n'
                                        'dev_err(dev->ctrl.device, "Removing after probe failure status: %d\\n", r);\n'
                                        'dev_info(dev->ctrl.device, "IO queue timeout\\n");\n',
             "fs/ext4/super.c": 'printk(KERN_WARNING "EXT4-fs warning (device %s): %s:%d: inode #%lu: comm %s: %pV\\n",'
                                ' id, f, l, ino, comm, &vaf);\n'
                                'ext4_warning(sb, "Filesystem error recorded "\n'
                                '             "from previous mount: %s", errstr);\n',
             "mm/memory-failure.c": 'WARN_ONCE(1, "Memory failure: mf_result=%d is not properly handled", r);\n'
                                    'pr_warn_ratelimited("Invalid error status block length!\\n");\n'}
    _tree(tmp_path, files)
    assert main(["--dir", str(tmp_path), "--level", "warning", "--grep", ".", *files]) == 0
    out = capsys.readouterr()
    rows = out.out.splitlines()[1:]
    assert [r.split(",")[2] for r in rows] == ["dev_warn", "printk", "ext4_warning", "WARN_ONCE", "pr_warn_ratelimited"]
    assert "5 candidate printers, 3 held by a catalog row, 2 classified by the engine as the row says" in out.err
    assert rows[0].endswith(",nvme-io-queues-lost,ok") and rows[2].endswith(",ext4-error-previous-mount,ok")
    assert rows[1].endswith(",ext4-error-previous-mount,ext4-error-previous-mount=none")
    with pytest.raises(SystemExit):
        main(["--dir", str(tmp_path), "--level", "notice", *files])
    assert "invalid choice: 'notice'" in capsys.readouterr().err


def test_nvswitch_uvm_and_fatal_level_printers_are_listed(tmp_path, capsys):
    """NV_PRINTF at LEVEL_FATAL (Hopper's SEC_FAULT lockdown, held and classified), the NVSwitch driver's SXid printers (NVSWITCH_PRINT_SXID, in a macro's body too) and nvswitch_os_print at
    the error level, and UVM's UVM_ERR_PRINT_ALWAYS, are listed; NVSWITCH_PRINT (compiled out of release builds),
    UVM_ERR_PRINT (printed only with uvm_debug_prints=1) and nvswitch_os_print at INFO are not. The SXid
    "Non-fatal, %s, instance=%d, chiplet=%d" printer a row holds is rendered with the row's bound switch name
    ("nvidia-nvswitch2", the prefix both share) and classified; with the name random it was not."""
    from tools.printer_candidates import main

    files = {"src/common/nvswitch/kernel/inc/intr_nvswitch.h":
             '    do {                                                                      \\\n'
             '        NVSWITCH_PRINT_SXID(device, NVSWITCH_ERR ## _logenum,                  \\\n'
             '            "Non-fatal, %s, instance=%d, chiplet=%d\\n", _str, instance, chiplet); \\\n'
             '    } while (0)\n',
             "src/common/nvswitch/kernel/ls10/therm_ls10.c":
             'NVSWITCH_PRINT_SXID(device, NVSWITCH_ERR_HW_HOST_THERMAL_SHUTDOWN,\n'
             '    "TSENSE OVERT Threshold reached. Shutting Down\\n");\n'
             'NVSWITCH_PRINT(device, ERROR, "%s: failed to read temperature\\n", __FUNCTION__);\n'
             'nvswitch_os_print(NVSWITCH_DBG_LEVEL_INFO, "ioctl %x failed\\n", cmd);\n',
             "kernel-open/nvidia-uvm/uvm_gpu.c":
             'UVM_ERR_PRINT("Failed to init GPU %s: %s\\n", name, nvstatusToString(status));\n'
             'UVM_ERR_PRINT_ALWAYS_RL("Fatal error on channel %s\\n", name);\n',
             "src/nvidia/src/kernel/gpu/arch/hopper/kern_gpu_gh100.c":
             'NV_PRINTF(LEVEL_FATAL, "SEC_FAULT lockdown detected. This is fatal. "\n'
             '                       "RM will now shut down. NV_EP_PCFG_GPU_VSEC_DEBUG_SEC: 0x%x\\n", secDebug);\n'}
    _tree(tmp_path, files)
    assert main(["--dir", str(tmp_path), *files]) == 0
    out = capsys.readouterr()
    rows = out.out.splitlines()[1:]
    assert [r.split(",")[2] for r in rows] == ["NVSWITCH_PRINT_SXID", "NVSWITCH_PRINT_SXID", "UVM_ERR_PRINT_ALWAYS_RL",
                                               "NV_PRINTF"]
    assert ",nvswitch-sxid-nonfatal" in rows[0] and rows[0].endswith(",ok"), rows
    assert rows[3].endswith(",nv-sec-fault,ok"), rows
    assert "4 candidate printers" in out.err
    # judged as the Link row alone (the chiplet row is its own format, so holds it trivially)
    from tools.printer_candidates import verdict

    link_row = [p for p in PRINTERS if p.id == "nvswitch-sxid-nonfatal"]
    assert verdict(["Non-fatal, %s, instance=%d, chiplet=%d"], link_row) == "ok"
