"""The systems timed: NumPy's hand-written gradients (the reference), Yota per backend, and
the peers (HIPS autograd, JAX, PyTorch eager and ``torch.compile``), each used when it
imports and skipped with its reason when it does not."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.log import why
from bench.workloads import Result, Workload


class Unavailable(Exception):
    """A system that cannot run here (not installed, or not working); the message says why."""


Step = Callable[[], Any]


@dataclass
class System:
    """One way of computing value and gradient.

    ``prepare(workload, inputs)`` returns ``(step, read)``: ``step()`` computes value and
    gradient in the system's own array types, ``read(step())`` converts them to NumPy."""

    name: str
    load: Callable[[], Any]
    prepare: Callable[[Any, Workload, dict[str, np.ndarray]], tuple[Step, Callable[[Any], Result]]]
    numpy_based: bool = False  # its arrays are NumPy arrays, so tracemalloc sees them
    dist: str = ""  # the distribution whose version is reported
    module: Any = None
    version: str = ""

    def setup(self) -> None:
        """Import the system; raise Unavailable with the reason if it cannot be used."""
        if self.module is None:
            try:
                self.module = self.load()
            except Exception as e:
                raise Unavailable(f"not installed or not importable ({why(e)})") from e
            self.version = dist_version(self.dist) if self.dist else ""


def _leaves(inputs: dict[str, np.ndarray], w: Workload) -> dict[str, np.ndarray]:
    return {n: inputs[n] for n in w.params}


def prepare_numpy(_: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
    return (lambda: w.hand(**inputs)), (lambda out: out)


def prepare_yota(backend: str) -> Callable[..., tuple[Step, Any]]:
    def prepare(yota: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
        loss = w.loss(np)
        args, consts = w.call_args(inputs)

        def f(*a: Any) -> Any:  # a fresh function per workload: Yota's cache starts empty
            return loss(*a, *consts)  # the consts are closure arrays, not differentiated

        def read(out: Any) -> Result:
            val, g = out
            if w.struct is not None:
                return float(val), {k[0]: v for k, v in g.flat[0].items()}
            return float(val), {n: g[i] for i, n in enumerate(w.params)}

        return (lambda: yota.grad(f, *args, backend=backend)), read
    return prepare


def load_yota() -> Any:
    import yota
    return yota


def load_autograd() -> Any:
    import autograd
    import autograd.numpy  # noqa: F401
    return autograd


def prepare_autograd(ag: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
    loss = w.loss(ag.numpy)
    consts = [inputs[n] for n in w.consts]
    vg = ag.value_and_grad(lambda d: loss(*w.pack(d), *consts))
    leaves = _leaves(inputs, w)
    return (lambda: vg(leaves)), (lambda out: (float(out[0]), dict(out[1])))


def load_jax() -> Any:
    import jax
    jax.config.update("jax_enable_x64", True)  # for the float64 workloads; f32 stays f32
    return jax


def prepare_jax(jax: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
    jnp = jax.numpy
    loss = w.loss(jnp)
    vg = jax.jit(jax.value_and_grad(lambda d, *c: loss(*w.pack(d), *c)))
    leaves = {n: jnp.asarray(v) for n, v in _leaves(inputs, w).items()}
    consts = [jnp.asarray(inputs[n]) for n in w.consts]

    def read(out: Any) -> Result:
        return float(out[0]), {n: np.asarray(v) for n, v in out[1].items()}

    return (lambda: jax.block_until_ready(vg(leaves, *consts))), read


def load_torch() -> Any:
    """PyTorch, with Inductor's on-disk cache in a fresh directory, so that torch.compile's
    first call is a cold compile as everyone else's is, not a hit from an earlier run."""
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-inductor-")
        atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], True)
    import torch
    return torch


def torch_namespace(torch: Any) -> Any:
    """The few NumPy-named functions the losses use, over torch tensors."""
    def tsum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return x.sum() if axis is None else x.sum(dim=axis, keepdim=keepdims)

    def tmax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return x.amax() if axis is None else x.amax(dim=axis, keepdim=keepdims)

    def tpad(x: Any, widths: Any) -> Any:  # NumPy's ((before, after), ...) per axis
        flat = [int(v) for pair in reversed(widths) for v in pair]
        return torch.nn.functional.pad(x, flat)

    return types.SimpleNamespace(sum=tsum, max=tmax, exp=torch.exp, log=torch.log,
                                 tanh=torch.tanh, arange=torch.arange, pad=tpad,
                                 transpose=lambda x, axes: x.permute(*axes))


def prepare_torch(compiled: bool) -> Callable[..., tuple[Step, Any]]:
    def prepare(torch: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
        loss = w.loss(torch_namespace(torch))
        leaves = {n: torch.from_numpy(v).requires_grad_() for n, v in _leaves(inputs, w).items()}
        consts = [torch.from_numpy(inputs[n]) for n in w.consts]
        tensors = list(leaves.values())
        names = list(leaves)

        def fwd(*ts: Any) -> Any:
            return loss(*w.pack(dict(zip(names, ts, strict=True))), *consts)

        if compiled:
            torch._dynamo.reset()  # one compiled graph per workload, never a recompile limit
            fwd = torch.compile(fwd)

        def step() -> Any:
            out = fwd(*tensors)
            return out.detach(), torch.autograd.grad(out, tensors)

        def read(out: Any) -> Result:
            return float(out[0]), {n: g.numpy() for n, g in zip(names, out[1], strict=True)}

        return step, read
    return prepare


def dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return ""


def all_systems(backends: Sequence[str]) -> list[System]:
    """NumPy first (the reference), then Yota per backend, then the peers."""
    systems = [System("numpy", lambda: np, prepare_numpy, True, "numpy")]
    systems += [System(f"yota[{b}]", load_yota, prepare_yota(b), True, "yota")
                for b in backends]
    return systems + [
        System("autograd", load_autograd, prepare_autograd, True, "autograd"),
        System("jax", load_jax, prepare_jax, False, "jax"),
        System("torch", load_torch, prepare_torch(False), False, "torch"),
        System("torch.compile", load_torch, prepare_torch(True), False, "torch"),
    ]


def yota_backends() -> tuple[list[str], str]:
    """Every backend Yota lists, and its default."""
    from yota.backends import BACKENDS, DEFAULT_BACKEND
    return list(BACKENDS), DEFAULT_BACKEND

