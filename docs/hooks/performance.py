"""MkDocs hook: the performance page is generated from the benchmark tools' JSON.

A marker line in a page, ``<!-- perf KIND FILE [FILE2] -->``, becomes the tables of the
JSON file ``docs/data/FILE`` and a plot drawn by matplotlib while the site builds:

- ``bench FILE``: a ``tools/bench.py --json`` report (the run's machine, command and load;
  the median per workload and system; the time of each over the physical bound, plotted);
- ``load PLAIN LOADED``: two such reports (without and with ``--load``), Yota's median over JAX's in each, plotted;
- ``compile FILE``: ``tools/bench_compile.py --json`` (first call against program size);
- ``transforms FILE``: ``tools/bench_transforms.py --json`` (Yota against JAX).

Numbers on the page come from the files only, so rerunning a tool and copying its JSON
into ``docs/data/`` is how the page changes.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

MARKER = re.compile(r"^<!-- perf (\w+) ([\w.-]+)(?: ([\w.-]+))? -->$", re.M)
DATA = "data"
PLOTS = "perf"  # generated images: perf/<kind>-<file stem>.png


def _load(docs_dir: str, name: str) -> Any:
    path = Path(docs_dir) / DATA / name
    if not path.exists():
        raise PluginError(f"performance page: {path} not found")
    return json.loads(path.read_text())


def _unwrap(data: Any) -> tuple[dict[str, Any], Any]:
    """(meta, results) of a tool's JSON: {"meta": ..., "results": ...} or bare results."""
    if isinstance(data, dict) and "results" in data and "meta" in data:
        return data["meta"], data["results"]
    return {}, data


def fmt_time(s: float | None) -> str:
    if s is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _meta_line(meta: dict[str, Any]) -> str:
    if not meta:
        return ""
    load = f"; {meta['load']} busy processes beside it (`--load`)" if meta.get("load") else ""
    return (f"Measured {meta.get('date', '?')} on {meta.get('machine', '?')} "
            f"({meta.get('cores', '?')} cores; threads: {meta.get('threads', '?')}{load}), "
            f"load average {meta.get('load_start', '?')} at the start and "
            f"{meta.get('load_end', '?')} at the end: `{meta.get('command', '?')}`.\n\n")


# -- tools/bench.py ------------------------------------------------------------------------------
def _medians(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {w["name"]: {r["system"]: r["median_s"] for r in w["results"]
                        if r.get("median_s") is not None} for w in report["workloads"]}


def bench_markdown(report: dict[str, Any], image: str) -> str:
    systems = [s for s in report["meta"]["systems"]
               if any(s in m for m in _medians(report).values())]
    lim = report["limits"]
    rows = ["| workload | what | bound | " + " | ".join(systems) + " |",
            "|---|---|---|" + "---:|" * len(systems)]
    for w in report["workloads"]:
        med = {r["system"]: r for r in w["results"]}
        cells = [fmt_time(med[s]["median_s"]) if s in med else "—" for s in systems]
        rows.append(f"| {w['name']} | {w.get('description', '')} | "
                    f"{fmt_time(w['bound']['bound_s'])} ({w['bound']['kind']}) | "
                    + " | ".join(cells) + " |")
    return (_meta_line(report["meta"])
            + f"Machine limits measured in the same run: memory bandwidth "
            f"{lim['bandwidth_Bps'] / 1e9:.3g} GB/s, BLAS {lim['gemm_size']}³ "
            f"{lim['flops']['float32'] / 1e9:.3g} GFLOP/s (float32), "
            f"{lim['flops']['float64'] / 1e9:.3g} GFLOP/s (float64).\n\n"
            + "\n".join(rows) + f"\n\n![Time over the physical bound]({image})\n")


def bench_plot(report: dict[str, Any]) -> Any:
    """Each system's median over the workload's bound (log scale), per workload."""
    med = _medians(report)
    bounds = {w["name"]: w["bound"]["bound_s"] for w in report["workloads"]}
    systems = [s for s in report["meta"]["systems"] if any(s in m for m in med.values())]
    return _bars(list(med), systems,
                 lambda w, s: med[w][s] / bounds[w] if s in med[w] and bounds[w] else None,
                 "median time / physical bound (log scale; 1 = the machine's limit)", True)


def load_markdown(quiet: dict[str, Any], loaded: dict[str, Any], image: str) -> str:
    rq, rl = _ratios(quiet), _ratios(loaded)
    rows = ["| workload | Yota / JAX, without `--load` | Yota / JAX, with `--load` |",
            "|---|---:|---:|"]
    for w in rq.keys() | rl.keys():
        rows.append(f"| {w} | {_num(rq.get(w))} | {_num(rl.get(w))} |")
    rows[2:] = sorted(rows[2:], key=_workload_order)
    return (f"Without load: {_meta_line(quiet['meta'])}With load: {_meta_line(loaded['meta'])}"
            + "\n".join(rows) + f"\n\n![Yota over JAX]({image})\n")


def _workload_order(row: str) -> tuple[int, str]:
    name = row.split("|")[1].strip()
    m = re.match(r"W(\d+)", name)
    return (int(m.group(1)) if m else 999, name)


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _ratios(report: dict[str, Any]) -> dict[str, float]:
    """Yota's median over JAX's per workload (the llvm backend, else the first yota)."""
    out = {}
    for w, m in _medians(report).items():
        yota = m.get("yota[llvm]") or next((v for k, v in m.items() if k.startswith("yota")),
                                           None)
        if yota and m.get("jax"):
            out[w] = yota / m["jax"]
    return out


def load_plot(quiet: dict[str, Any], loaded: dict[str, Any]) -> Any:
    rq, rl = _ratios(quiet), _ratios(loaded)
    names = sorted(rq.keys() | rl.keys(), key=lambda n: _workload_order(f"|{n}|"))
    series = {"without --load": rq, "with --load": rl}
    return _bars(names, list(series), lambda w, s: series[s].get(w),
                 "Yota's median / JAX's (below 1: Yota faster)", False, line=1.0)


# -- tools/bench_compile.py and tools/bench_transforms.py ----------------------------------------
def compile_markdown(data: Any, image: str) -> str:
    meta, res = _unwrap(data)
    rows = ["| program | size | ops traced → compiled | Yota first call | JAX first call | "
            "Yota step | JAX step |", "|---|---:|---|---:|---:|---:|---:|"]
    for key, r in res.items():
        prog, size = key.split("/")
        y, j = r.get("yota", {}), r.get("jax", {})
        rows.append(f"| {prog} | {size} | {y.get('traced', '—')} → {y.get('ops', '—')} | "
                    f"{y.get('error') or fmt_time(y.get('first'))} | "
                    f"{j.get('error') or fmt_time(j.get('first'))} | "
                    f"{fmt_time(y.get('step'))} | {fmt_time(j.get('step'))} |")
    return _meta_line(meta) + "\n".join(rows) + f"\n\n![First call against size]({image})\n"


def compile_plot(data: Any) -> Any:
    import matplotlib.pyplot as plt

    _, res = _unwrap(data)
    progs = sorted({k.split("/")[0] for k in res})
    fig, axes = plt.subplots(1, len(progs), figsize=(4.5 * len(progs), 3.4), squeeze=False)
    for ax, prog in zip(axes[0], progs, strict=True):
        for system, style in (("yota", "o-"), ("jax", "s--")):
            pts = [(int(k.split("/")[1]), r[system]["first"]) for k, r in res.items()
                   if k.startswith(prog + "/") and "first" in r.get(system, {})]
            if pts:
                ax.plot(*zip(*sorted(pts), strict=True), style, label=system)
        ax.set(xscale="log", yscale="log", title=prog, xlabel="size (steps or blocks)",
               ylabel="first call (s)")
        ax.legend()
    fig.tight_layout()
    return fig


def transforms_markdown(data: Any, image: str) -> str:
    meta, res = _unwrap(data)
    rows = ["| workload | Yota | JAX `jit` | Yota / JAX | max rel. difference |",
            "|---|---:|---:|---:|---:|"]
    for r in res:
        rows.append(f"| {r['desc']} | {r['yota']['median_ms']:.3g} ms | "
                    f"{r['jax']['median_ms']:.3g} ms | {r['ratio']:.2f} | "
                    f"{r['max_rel_diff']:.0e} |")
    return _meta_line(meta) + "\n".join(rows) + f"\n\n![Yota and JAX]({image})\n"


def transforms_plot(data: Any) -> Any:
    _, res = _unwrap(data)
    by = {r["name"]: r for r in res}
    return _bars(list(by), ["yota", "jax"], lambda w, s: by[w][s]["median_ms"],
                 "median time per call (ms)", False)


# -- drawing ------------------------------------------------------------------------------------
def _bars(groups: list[str], series: list[str], value: Any, xlabel: str, log: bool,
          line: float | None = None) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(groups) * max(1, len(series) / 2) + 1.2))
    h = 0.8 / max(1, len(series))
    for i, s in enumerate(series):
        ys = [k + i * h for k in range(len(groups))]
        vals = [value(g, s) for g in groups]
        ax.barh([y for y, v in zip(ys, vals, strict=True) if v is not None],
                [v for v in vals if v is not None], height=h, label=s)
    ax.set_yticks([k + h * (len(series) - 1) / 2 for k in range(len(groups))], groups)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    if line is not None:
        ax.axvline(line, color="black", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


# -- the hook -------------------------------------------------------------------------------------
_RENDER = {"bench": (bench_markdown, bench_plot), "load": (load_markdown, load_plot),
           "compile": (compile_markdown, compile_plot),
           "transforms": (transforms_markdown, transforms_plot)}


def _markers(docs_dir: str, files: Files) -> list[tuple[str, str, list[str]]]:
    """(page src_uri, kind, data files) of every marker in the pages."""
    found = []
    for f in files.documentation_pages():
        text = Path(docs_dir, f.src_uri).read_text(encoding="utf-8")
        for m in MARKER.finditer(text):
            if m.group(1) not in _RENDER:
                raise PluginError(f"{f.src_uri}: unknown performance marker {m.group(0)}")
            found.append((f.src_uri, m.group(1), [n for n in m.groups()[1:] if n]))
    return found


def _image(kind: str, names: list[str]) -> str:
    return f"{PLOTS}/{kind}-{'-'.join(Path(n).stem for n in names)}.png"


def on_files(files: Files, config: Any) -> Files:
    import matplotlib

    matplotlib.use("Agg")
    for _, kind, names in _markers(config["docs_dir"], files):
        src = _image(kind, names)
        if files.get_file_from_path(src) is None:
            fig = _RENDER[kind][1](*[_load(config["docs_dir"], n) for n in names])
            files.append(File.generated(config, src, content=_png(fig)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    depth = page.file.src_uri.count("/")

    def expand(m: re.Match[str]) -> str:
        kind, names = m.group(1), [n for n in m.groups()[1:] if n]
        image = "../" * depth + _image(kind, names)
        return _RENDER[kind][0](*[_load(config["docs_dir"], n) for n in names], image)

    return MARKER.sub(expand, markdown)


