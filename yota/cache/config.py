"""The cache's settings (environment variables), its counters, errors and warnings.

Yota's environment variables: ``YOTA_CACHE`` (``0``, ``off``: no on-disk cache;
``enabled``), ``YOTA_CACHE_DIR`` (``cache_dir``), ``YOTA_CACHE_MAX_BYTES`` (``max_bytes``)
here; for compile feedback (``yota.phases``), ``YOTA_LOG=compile`` (each compile's line
on stderr: its op counts and the time of each phase, without configuring ``logging``)
and ``YOTA_COMPILE_NOTICE_S`` (a compile running longer says so once; default 2 s, ``0``
or ``off``: never); ``YOTA_VERIFY=1`` verifies the IR after every pass.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

from yota.ir.errors import YotaError


class YotaLog:
    """The ``yota`` logger (``logging.getLogger("yota")``), without importing ``logging``
    at start-up: an info or debug record is dropped while ``logging`` is not imported
    (nothing can have configured a handler or a level for it then, and an unconfigured
    logger drops them too); everything else goes to the real logger."""

    @staticmethod
    def logger() -> Any:
        import logging

        return logging.getLogger("yota")

    def info(self, msg: str, *args: Any) -> None:
        if "logging" in sys.modules:
            self.logger().info(msg, *args, stacklevel=2)

    def debug(self, msg: str, *args: Any) -> None:
        if "logging" in sys.modules:
            self.logger().debug(msg, *args, stacklevel=2)

    def warning(self, msg: str, *args: Any) -> None:
        self.logger().warning(msg, *args, stacklevel=2)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.logger(), name)


log = YotaLog()

DEFAULT_MAX_BYTES = 1 << 30


class CacheWarning(UserWarning):
    """A cache problem that Yota recovered from (the result is still correct)."""


class BadEntry(YotaError):
    """A stored entry that cannot be used: corrupt, truncated, stale or foreign."""


class Counters:
    """Named integer counters of this process (``_FIELDS``), with a dataclass's keyword
    init, repr, equality and ``vars()``, and ``reset()``: a plain class, since creating
    dataclasses cost ``import yota`` ~0.4-0.5 ms each."""

    _FIELDS: tuple[str, ...] = ()

    def __init__(self, **values: int) -> None:
        unknown = set(values) - set(self._FIELDS)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no counter {sorted(unknown)[0]!r}")
        for name in self._FIELDS:
            setattr(self, name, values.get(name, 0))

    def _values(self) -> tuple[int, ...]:
        return tuple(getattr(self, n) for n in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # (mutable counters)

    def __repr__(self) -> str:
        return (type(self).__name__ + "("
                + ", ".join(f"{n}={getattr(self, n)}" for n in self._FIELDS) + ")")

    def reset(self) -> None:
        for name in self._FIELDS:
            setattr(self, name, 0)


class CacheStats(Counters):
    """Counters of this process: ``hits`` entries loaded instead of compiled, ``misses``
    lookups that found nothing usable, ``compiles`` programs compiled by the cache
    layer, ``stores`` entries written, ``errors`` bad entries or failed writes
    recovered from, ``evictions`` entries removed for the size limit."""

    _FIELDS = ("hits", "misses", "compiles", "stores", "errors", "evictions")
    hits: int
    misses: int
    compiles: int
    stores: int
    errors: int
    evictions: int


stats = CacheStats()


# -- configuration ------------------------------------------------------------------------
def enabled() -> bool:
    """False when ``YOTA_CACHE`` is ``0``, ``off``, ``false`` or ``no``."""
    return os.environ.get("YOTA_CACHE", "1").strip().lower() not in ("0", "off", "false", "no")


def cache_dir() -> Path:
    """``$YOTA_CACHE_DIR``, else ``$XDG_CACHE_HOME/yota``, else ``~/.cache/yota``."""
    env = os.environ.get("YOTA_CACHE_DIR")
    if env:
        return Path(env).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base).absolute() / "yota"


def max_bytes() -> int:
    raw = os.environ.get("YOTA_CACHE_MAX_BYTES", "")
    try:
        return int(float(raw)) if raw.strip() else DEFAULT_MAX_BYTES
    except ValueError:
        _warn_once(f"YOTA_CACHE_MAX_BYTES={raw!r} is not a number; using "
                   f"{DEFAULT_MAX_BYTES} bytes")
        return DEFAULT_MAX_BYTES


_warned: set[str] = set()


def _warn_once(msg: str) -> None:
    if msg not in _warned:
        _warned.add(msg)
        _warn(msg)


def _warn(msg: str) -> None:
    log.warning("yota cache: %s", msg)
    warnings.warn(f"yota cache: {msg}", CacheWarning, stacklevel=4)

