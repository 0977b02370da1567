"""The report of ``benchmarks.checkpoint_vs_dcp`` (a helper, not a benchmark: ``python -m benchmarks`` skips
``_`` modules): one run's table (each column's median [min-max] and the ratios
of medians) and, over ``--runs``, the median [min-max] of each run's ratios."""

from __future__ import annotations

import statistics

def spread(values: list[float], scale: float) -> str:
    """``median [min-max]`` of ``values`` times ``scale``."""
    return f"{statistics.median(values) * scale:.1f} [{min(values) * scale:.1f}-{max(values) * scale:.1f}]"


HEADS = {"dcp": "DCP DefaultStager", "titan": "torchtitan pinned", "openpod_nvme": "openpod nvme",
         "openpod": "openpod memory+nvme"}
# (column, baseline) of the printed ratios: ``openpod nvme`` writes the one tier DCP writes (like for like);
# ``openpod memory+nvme`` also keeps a snapshot in /dev/shm for restores from node memory, which DCP does not.
RATIOS = [("nvme/DCP", "openpod_nvme", "dcp"), ("mem+nvme/DCP", "openpod", "dcp"),
          ("nvme/titan", "openpod_nvme", "titan")]


def report(runs: dict[str, list[dict]], q: float, nbytes: int, cuda: bool, disk: list[dict] = (),
           idle: list[dict] = ()) -> dict:
    """Print the table; returns ``{row: {column: median}}``, ``ratios`` (``{"col/base": {row: ratio}}``),
    ``staged`` (openpod's staging buffer over the state's bytes, per openpod column; pinned bytes on CUDA) and,
    given ``disk`` (:func:`disk_limit`'s records), ``disk`` (the median of each rep's fastest way), ``disk_<way>``
    (each way's median), ``durable_over_disk`` (per column, its median time to durable over it) and, where the
    records have it, ``disk_loaded`` and ``durable_over_loaded_disk`` (the same beside the training loop); given
    ``idle`` (openpod nvme's saves with the training loop idle), ``durable_idle`` and ``durable_idle_over_disk``."""

    def lost(r):  # the step time above the quiet median, over the steps the save overlapped
        return sum(r["steps"]) - q * len(r["steps"])

    def slow(r):
        return (statistics.median(r["steps"]) / q - 1) if r["steps"] else 0.0

    rows = [("blocking", "blocking (save call + staging wait)", lambda r: r["blocking"], 1e3, "ms"),
            ("durable", "time to durable (fsynced on disk)", lambda r: r["durable"], 1e3, "ms"),
            ("memory", "peak host memory incl. /dev/shm", lambda r: r["mem"], 1 / 2**20, "MiB"),
            ("slowdown", "step slowdown while the save runs", slow, 100, "%"),
            ("lost", "training time lost per save", lost, 1e3, "ms")]
    names = [n for n, _, _ in RATIOS]
    print()
    print(f"{'':38s}" + "".join(f"{HEADS[k]:>24s}" for k in runs) + "".join(f"{n:>14s}" for n in names))
    out: dict = {"ratios": {n: {} for n in names}}
    for key, label, f, scale, unit in rows:
        vals = {k: [f(r) for r in v] for k, v in runs.items()}
        med = {k: statistics.median(v) for k, v in vals.items()}
        out[key] = med
        cells = []
        for n, c, b in RATIOS:
            ok = med[b] > 0 and med[c] > 0
            out["ratios"][n][key] = med[c] / med[b] if ok else None
            cells.append(f"{med[c] / med[b]:.2f}x" if ok else "-")
        print(f"{label + ' (' + unit + ')':38s}" + "".join(f"{spread(v, scale):>24s}" for v in vals.values())
              + "".join(f"{c:>14s}" for c in cells))
    if disk:
        limits = [x["limit"] for x in disk]
        d = statistics.median(limits)
        out["disk"] = d
        out["durable_over_disk"] = {k: v / d for k, v in out["durable"].items()}
        for way in [w for w in disk[0] if w not in ("limit", "loaded")]:
            got = [x[way] for x in disk if way in x]
            if got:
                out[f"disk_{way}"] = statistics.median(got)
                print(f"{'disk: write + fsync, ' + way + ' (ms)':38s}{spread(got, 1e3):>24s}")
        print(f"{'disk limit: the fastest of those (ms)':38s}{spread(limits, 1e3):>24s}   "
              f"({nbytes / 2**20 / d:.0f} MiB/s)")
        print(f"{'time to durable / disk limit':38s}"
              + "".join(f"{out['durable_over_disk'][k]:>23.2f}x" for k in runs) + "   (target: openpod nvme <= 1.2x)")
        loaded = [x["loaded"] for x in disk if "loaded" in x]
        if loaded:  # the same writes while the training loop steps on another thread, as it does beside a save
            out["disk_loaded"] = statistics.median(loaded)
            out["durable_over_loaded_disk"] = {k: v / out["disk_loaded"] for k, v in out["durable"].items()}
            print(f"{'disk limit beside the training loop':38s}{spread(loaded, 1e3):>24s}   "
                  f"({out['disk_loaded'] / d:.2f}x the quiet limit)")
            print(f"{'time to durable / that limit':38s}"
                  + "".join(f"{out['durable_over_loaded_disk'][k]:>23.2f}x" for k in runs))
        if idle:  # the same save with the loop idle: the CPU left to the save, as a GPU job's host has it
            got = [r["durable"] for r in idle]
            out["durable_idle"] = statistics.median(got)
            out["durable_idle_over_disk"] = out["durable_idle"] / d
            print(f"{'openpod nvme, loop idle: durable (ms)':38s}{spread(got, 1e3):>24s}   "
                  f"{out['durable_idle_over_disk']:.2f}x the disk limit (target <= 1.2x)")
    # The staging buffer openpod keeps between saves (one flat buffer, views carved from it): <= 1.05x the state.
    out["staged"] = {k: max(r["pinned" if cuda else "staged"] for r in runs[k]) / nbytes
                     for k in ("openpod_nvme", "openpod")}
    what = "pinned host memory (registered staging buffer + caching host allocator)" if cuda else "staging buffer"
    print(f"openpod's {what} / state: " + ", ".join(f"{HEADS[k]} {v:.3f}x" for k, v in out["staged"].items())
          + " (target <= 1.05x)")
    if cuda:  # the baselines' pinned copies, for comparison (the caching host allocator rounds blocks up)
        out["pinned"] = {k: max(r["pinned"] for r in v) / nbytes for k, v in runs.items()}
        print("pinned host memory / state: " + ", ".join(f"{HEADS[k]} {v:.3f}x" for k, v in out["pinned"].items()))
    print(f"(median quiet step {q * 1e3:.1f} ms; state {nbytes / 2**20:.0f} MiB; targets: blocking and time to "
          f"durable <= DCP's, memory <= DCP's - like for like, openpod nvme against DCP)")
    return out


# (label, how to get it from one run's report): the rows of the summary over ``--runs``
SUMMARY = [("openpod nvme / DCP: blocking", lambda o: o["ratios"]["nvme/DCP"]["blocking"]),
           ("openpod nvme / DCP: time to durable", lambda o: o["ratios"]["nvme/DCP"]["durable"]),
           ("openpod nvme / DCP: peak host memory", lambda o: o["ratios"]["nvme/DCP"]["memory"]),
           ("openpod nvme / DCP: training time lost", lambda o: o["ratios"]["nvme/DCP"]["lost"]),
           ("time to durable / disk limit: openpod nvme", lambda o: o["durable_over_disk"]["openpod_nvme"]),
           ("time to durable / disk limit: DCP", lambda o: o["durable_over_disk"]["dcp"]),
           ("time to durable / disk limit: openpod nvme, loop idle", lambda o: o.get("durable_idle_over_disk")),
           ("disk limit beside the loop / quiet disk limit", lambda o: o["disk_loaded"] / o["disk"]
            if "disk_loaded" in o else None),
           ("time to durable / disk limit beside the loop: openpod nvme",
            lambda o: o.get("durable_over_loaded_disk", {}).get("openpod_nvme")),
           ("time to durable / disk limit beside the loop: DCP",
            lambda o: o.get("durable_over_loaded_disk", {}).get("dcp"))]


def summarize(outs: list[dict], loads: list[float]) -> dict:
    """Print and return, per :data:`SUMMARY` row, the median [min-max] over the runs of each run's ratio of
    medians (how docs/training.md states the targets), with the load average at the start of each run."""
    print(f"\nsummary of {len(outs)} runs: median [min-max] of each run's ratio of medians; 1-minute load average "
          f"at each run's start: {', '.join(f'{x:.2f}' for x in loads)}")
    res = {}
    for label, get in SUMMARY:
        vals = [v for v in (get(o) for o in outs) if v is not None]
        res[label] = vals
        if vals:
            print(f"  {label:44s} {statistics.median(vals):.2f}x [{min(vals):.2f}-{max(vals):.2f}]   runs: "
                  + " ".join(f"{v:.2f}" for v in vals))
    return res
