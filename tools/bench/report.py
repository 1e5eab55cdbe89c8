"""The report: the Markdown tables of a run (summary, first calls, details, what was not
timed) and its JSON."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from bench.log import log


def fmt_time(s: float | None) -> str:
    if s is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_ratio(x: float | None) -> str:
    return "—" if x is None else f"{_num(x)}×"


def fmt_mib(b: int | None) -> str:
    return "—" if b is None else f"{b / 2**20:.3g}"



def markdown(report: dict[str, Any]) -> str:
    meta, lim = report["meta"], report["limits"]
    systems = meta["systems"]
    lines = [f"Measured {meta['date']} on {meta['machine']} ({meta['cores']} cores; threads: "
             f"{meta['threads']}), `{meta['command']}`.", "",
             f"Machine limits measured in the same run: memory bandwidth "
             f"{lim['bandwidth_Bps'] / 1e9:.3g} GB/s (triad over 3 × "
             f"{lim['triad_array_bytes'] / 2**20:.0f} MiB arrays, up to {lim['threads']} "
             f"thread(s)); BLAS {lim['gemm_size']}³ matrix product "
             f"{lim['flops']['float32'] / 1e9:.3g} GFLOP/s float32, "
             f"{lim['flops']['float64'] / 1e9:.3g} GFLOP/s float64.", "",
             f"Load average (1 min) at start and end: {meta['load_start']} and "
             f"{meta['load_end']}" + (f"; {meta['load']} busy process(es) ran during the "
                                      "workloads (--load)" if meta.get("load") else "")
             + ".", "",
             f"Each cell: median time per value-and-gradient call (its ratio to "
             f"{_ref_label(report)}, its ratio to the workload's physical bound):", "",
             "| workload | bound | " + " | ".join(systems) + " |",
             "|---|---|" + "---|" * len(systems)]
    for w in report["workloads"]:
        by = {r["system"]: r for r in w["results"]}
        cells = [_summary_cell(by.get(s)) for s in systems]
        b = w["bound"]
        lines.append(f"| {w['name']} | {fmt_time(b['bound_s'])} ({b['kind']}) | "
                     + " | ".join(cells) + " |")
    lines += ["", "First call (trace + compile + one run, before any warm-up):", "",
              "| workload | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    for w in report["workloads"]:
        by = {r["system"]: r for r in w["results"]}
        cells = [fmt_time(by[s]["first_call_s"]) if s in by else "—" for s in systems]
        lines.append(f"| {w['name']} | " + " | ".join(cells) + " |")
    lines += ["", "Details (× Yota = system time / Yota time, so above 1 means Yota is faster; "
              "peak memory: tracemalloc for NumPy-based systems, RSS high-water delta for "
              "all, a lower bound):", "",
              "| workload | system | median | q1–q3 | first call | × Yota | × bound | "
              "peak MiB (tracemalloc) | peak MiB (RSS Δ) | rounds × calls |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for w in report["workloads"]:
        for r in w["results"]:
            if r["median_s"] is not None:
                lines.append(_detail_row(w, r))
    problems = [f"- {w['name']} {r['system']}: {r['status']}: {r['reason']}"
                for w in report["workloads"] for r in w["results"] if r["status"] != "ok"]
    if problems:
        lines += ["", "Not timed:", "", *_collapse(problems)]
    return "\n".join(lines) + "\n"


def _summary_cell(r: dict[str, Any] | None) -> str:
    if r is None or r["median_s"] is None:
        return "—" if r is None else r["status"]
    return (f"{fmt_time(r['median_s'])} ({_num(r['ratio_to_yota'])}, "
            f"{_num(r['ratio_to_bound'])})")


def _num(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{float(f'{x:.3g}'):,.0f}" if x >= 1000 else f"{x:.3g}"


def _ref_label(report: dict[str, Any]) -> str:
    refs = sorted({w["ratio_reference"] for w in report["workloads"]} - {None})
    return " / ".join(refs) if refs else "Yota"


def _detail_row(w: dict[str, Any], r: dict[str, Any]) -> str:
    return (f"| {w['name']} | {r['system']} | {fmt_time(r['median_s'])} | "
            f"{fmt_time(r['q1_s'])}–{fmt_time(r['q3_s'])} | {fmt_time(r['first_call_s'])} | "
            f"{fmt_ratio(r['ratio_to_yota'])} | {fmt_ratio(r['ratio_to_bound'])} | "
            f"{fmt_mib(r['peak_tracemalloc_bytes'])} | {fmt_mib(r['peak_rss_delta_bytes'])} | "
            f"{r['rounds']} × {r['calls_per_sample']} |")


def _collapse(problems: list[str]) -> list[str]:
    """One line per skipped system instead of one per workload."""
    out: list[str] = []
    for p in problems:
        if ": skipped: " in p:
            system = p.split(": skipped:")[0].split(" ", 2)[2]
            line = f"- {system}: skipped: {p.split(': skipped: ', 1)[1]}"
            if line not in out:
                out.append(line)
        else:
            out.append(p)
    return out

def write_json(report: dict[str, Any], path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=_jsonable)
    log(f"JSON written to {path}")


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)

