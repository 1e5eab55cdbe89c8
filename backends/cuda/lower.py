"""Lowering IR functions to ONE CUDA module (``Module``: kernel sources, constants,
failure records) plus, per function, the steps of ``backends/program.py`` (launches,
memsets, cuBLAS products through CuPy's ``matmul``, calls) that the runtime replays on
CuPy's current stream. Nothing here runs on a device: a module can be rendered, compiled
(``nvrtc.compile_cubin``) and its steps inspected anywhere.

The emitters (``backends/emit.py`` and ``emit.py``) render one op each, from the
locations the layout decided; this module holds what the CUDA ones share beyond
``backends/lowering.py``: naming and scheduling kernels, their launches and second
stages, scratch regions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from yota.ir.core import Function

from ..kernel import Kernel, normalize, rebase
from ..layout import Loc
from ..lowering import Emitter, FnLowering, KernelArgs
from ..program import FnPlan, Launch, Ref, Step
from .cexpr import PRELUDE, acc_type
from .kernel import (
    Config,
    named,
    render_elementwise,
    render_reduction,
    render_stage2,
    schedule,
    size_generic,
)
from .layout import build_layout
from .specfun import definitions
from .special import STATUS_HELPERS


@dataclass
class Module:
    """Everything lowered from one function: kernels (name -> source, in first-use
    order), per-function plans, constants and failure records."""

    cfg: Config
    kernels: dict[str, str] = field(default_factory=dict)
    plans: dict[str, FnPlan] = field(default_factory=dict)
    consts: list[np.ndarray] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    main: str = ""
    callees: dict[str, Function] = field(default_factory=dict)
    name: str = ""
    inputs: list[Any] = field(default_factory=list)  # TensorTypes of the main function
    outputs: list[Any] = field(default_factory=list)
    labels: list[str | None] = field(default_factory=list)
    # a loop body's name -> the lengths of the loops it runs in, outermost first
    loops: dict[str, list[int]] = field(default_factory=dict)

    def kernel(self, template: str, prefix: str = "y") -> str:
        """Add a kernel (source with ``NAME``); returns its name."""
        name, src = named(template, prefix)
        self.kernels.setdefault(name, src)
        return name

    def failure(self, record: dict[str, Any]) -> int:
        self.failures.append(record)
        return len(self.failures)

    def source(self) -> str:
        return module_source(self.kernels.values())


def module_source(kernels: Any) -> str:
    kernels = list(kernels)
    return "\n\n".join([PRELUDE + STATUS_HELPERS, definitions(kernels), *kernels]) + "\n"


class FnGen(FnLowering):
    """The lowering of one IR function to steps (and kernels of the module)."""

    def __init__(self, mod: Module, fn: Function, emitters: Mapping[str, Emitter]) -> None:
        super().__init__(fn, build_layout(fn), emitters)
        self.mod = mod
        self.cfg = mod.cfg
        self.steps: list[Step] = []
        self.step_ops: list[int] = []
        self.const_base = len(mod.consts)
        mod.consts.extend(self.lay.consts)

    def run(self) -> FnPlan:
        self.emit_ops()
        storages = [s if s.kind != "const" else type(s)("const", s.index + self.const_base,
                                                         s.nbytes) for s in self.lay.storages]
        return FnPlan(self.fn.name, storages, self.steps,
                      self.lay.ws_bytes + self.scratch_max, self.step_ops)

    @contextlib.contextmanager
    def step(self, op_index: int) -> Iterator[None]:
        """Remember which op the steps emitted in this context come from."""
        n = len(self.steps)
        yield
        self.step_ops.extend([op_index] * (len(self.steps) - n))

    def function(self, fn: Function) -> FnPlan:
        """The plan of callee ``fn`` (lowered into the same module once)."""
        if fn.name not in self.mod.plans:
            self.mod.plans[fn.name] = FnGen(self.mod, fn, self.emitters).run()
        return self.mod.plans[fn.name]

    def failure(self, record: dict[str, Any]) -> int:
        """The failure code of ``record`` (inside loops: with the loops' lengths, so that
        the error names the step)."""
        loops = self.mod.loops.get(self.fn.name)
        return self.mod.failure({**record, "loops": loops} if loops else record)

    # -- memory ----------------------------------------------------------------------------
    def ref(self, loc: Loc, dtype: np.dtype, extra: int = 0) -> Ref:
        return (loc.storage, (loc.offset + extra) * np.dtype(dtype).itemsize)

    def scratch(self, nbytes: int) -> Ref:
        """Workspace bytes that live only while the current op runs."""
        off = self.scratch_offset(nbytes)
        return (self.lay.add_storage("ws", off, nbytes), 0)

    # -- kernels -----------------------------------------------------------------------------
    def launch(self, k: Kernel, args: KernelArgs) -> None:
        """Render, name and schedule kernel ``k`` (and its second stage, if any)."""
        if k.size() == 0 and not (k.reductions and k.kept_size() > 0):
            return
        k = normalize(k)
        k, low = rebase(k)
        refs = [(s, low.get(j, 0)) for j, s in enumerate(args.storages)]
        sch = schedule(k, self.cfg)
        block = (self.cfg.block, 1, 1)
        if sch.kind == "elementwise":
            name = self.mod.kernel(render_elementwise(k, "NAME", self.cfg))
            scalars = (k.size(),) if size_generic(k) else ()
            self.steps.append(Launch(name, sch.grid, block, tuple(refs), scalars))
            return
        partials: list[Ref] = []
        if sch.splits > 1:
            nk = k.kept_size()
            for _, vid, _ in k.reductions:
                item = np.dtype(_acc_np(acc_type(k.nodes[vid].dtype))).itemsize
                partials.append(self.scratch(nk * sch.splits * item))
        name = self.mod.kernel(render_reduction(k, "NAME", self.cfg, sch))
        self.steps.append(Launch(name, sch.grid, block, tuple(refs + partials)))
        if sch.splits > 1:
            outs = sorted({a.param for _, _, a in k.reductions})
            name2 = self.mod.kernel(render_stage2(k, "NAME", self.cfg, sch))
            grid2 = (sch.grid[0], 1, 1)
            self.steps.append(Launch(name2, grid2, block,
                                     tuple([refs[p] for p in outs] + partials)))

    def special(self, template: str, grid: tuple[int, int, int], refs: list[Ref],
                block: int | None = None) -> None:
        name = self.mod.kernel(template)
        self.steps.append(Launch(name, grid, (block or self.cfg.block, 1, 1), tuple(refs)))

    def grid_for(self, n: int) -> tuple[int, int, int]:
        return (max(1, min(-(-n // self.cfg.block), self.cfg.max_grid)), 1, 1)


def _acc_np(c: str) -> Any:
    return {"int": np.int32, "long long": np.int64, "float": np.float32,
            "double": np.float64}[c]
