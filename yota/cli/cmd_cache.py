"""``yota-ir cache ...``: inspect and manage the on-disk cache of compiled programs."""

from __future__ import annotations

import json
import os
import time

import click

from yota import cache as yc
from yota.explain import explain

from .app import EXIT_ERROR, ToolError, main, user_code
from .targets import load_target, target_options


@main.group("cache")
@click.option("--dir", "cache_dir", default=None, metavar="DIR",
              help="The cache directory [default: $YOTA_CACHE_DIR, else ~/.cache/yota].")
def cache_group(cache_dir: str | None) -> None:
    """Inspect and manage the on-disk cache of compiled programs (yota.cache).

    \b
    Examples:
      yota-ir cache list
      yota-ir cache info 3f2a91
      yota-ir cache explain model.py:loss --example example
      yota-ir cache verify --remove
      yota-ir cache clear
    """
    if cache_dir is not None:
        os.environ["YOTA_CACHE_DIR"] = os.path.abspath(cache_dir)


@cache_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entry, in a list.")
def cache_list(as_json: bool) -> None:
    """List the entries, most recently used first."""
    rows = yc.entries()
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    click.echo(f"{len(rows)} entries, {sum(r['bytes'] for r in rows)} bytes in "
               f"{yc.cache_dir()}")
    for r in rows:
        when = _ago(r["last_used"])
        click.echo(f"  {r['key'][:16]}  {r['bytes']:>9}  {when:>9}  {r['kind'] or '?':<7}  "
                   f"@{r['function']}  {_clip(r['signature'] or '', 60)}")


def _ago(t: float) -> str:
    s = max(0.0, time.time() - t)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s / n:.0f}{unit} ago"
    return f"{s:.0f}s ago"


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 3] + "..."


@cache_group.command("info")
@click.argument("key")
@click.option("--ir", "show_ir", is_flag=True, help="Also print the stored IR.")
@click.option("--json", "as_json", is_flag=True, help="The entry's metadata as JSON.")
def cache_info(key: str, show_ir: bool, as_json: bool) -> None:
    """Show one entry (KEY: the key or a unique prefix), checked as a load would."""
    cache = yc.default_cache()
    full = cache.resolve(key)
    try:
        entry = cache.read(full)
    except yc.BadEntry as e:
        raise ToolError(f"entry {full[:16]} is unusable: {e}") from None
    if entry is None:
        raise ToolError(f"no entry {full}")
    meta = entry.meta
    if as_json:
        click.echo(json.dumps(meta, indent=1, sort_keys=True))
        return
    click.echo(f"key {full}  (checksum ok)\n  path {entry.path}")
    click.echo(f"  @{meta['function']}: {meta['parts']['kind']}, "
               f"{len(entry.files['object.o'])} bytes of object code")
    for name in yc.KEY_PARTS:
        click.echo(f"  {name:<10} {_clip(json.dumps(meta['parts'][name]), 90)}")
    click.echo("  inputs:  " + ", ".join(f"{i['label']}: {i['type']}" for i in meta["inputs"]))
    click.echo("  outputs: " + ", ".join(f"{o['label']}: {o['type']}" for o in meta["outputs"]))
    plan = meta.get("memory_plan", {})
    if plan:
        click.echo(f"  memory plan: {plan.get('mem_total_bytes')} bytes in "
                   f"{len(plan.get('mem_buffers', []))} buffers (peak "
                   f"{plan.get('mem_peak_bytes')})")
    click.echo(f"  guards: {len(meta.get('guards', []))}; checks in the code: "
               f"{len(meta['backend_meta'].get('failures', []))}")
    if show_ir:
        click.echo(entry.files["program.yir"].decode().rstrip())


@cache_group.command("explain")
@target_options
@click.option("--forward", is_flag=True, help="The program yota.compile builds (not the "
              "gradient).")
def cache_explain(target: str, args_expr: str | None, example: str | None, seed: int,
                  forward: bool) -> None:
    """Show the key of TARGET's gradient program, its parts, and whether it is cached; on
    a miss, the nearest stored entry and the parts that differ (with an IR diff)."""
    t = load_target(target, args_expr, example, seed)
    with user_code(f"tracing {t.name}"):
        ex = explain(t.func, *t.args, kind="forward" if forward else "grad")
    click.echo(str(ex))


@cache_group.command("clear")
def cache_clear() -> None:
    """Remove every entry."""
    n = yc.clear()
    click.echo(f"removed {n} entries from {yc.cache_dir()}")


@cache_group.command("verify")
@click.option("--remove", is_flag=True, help="Remove the entries that would not load.")
def cache_verify(remove: bool) -> None:
    """Check every entry (format, sizes, checksum) without loading it; exit status 1 if
    some are bad (unless --remove removed them)."""
    bad = yc.verify(remove=remove)
    total = len(yc.default_cache().keys()) + (len(bad) if remove else 0)
    for k, why in bad:
        click.echo(f"  {k[:16]}  {'removed: ' if remove else ''}{why}")
    click.echo(f"{total - len(bad)} of {total} entries ok in {yc.cache_dir()}")
    if bad and not remove:
        raise click.exceptions.Exit(EXIT_ERROR)
