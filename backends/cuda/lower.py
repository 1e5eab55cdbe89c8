"""Lowering an ``ir.Function`` (and its callees) to ONE CUDA module plus, per function, a
list of *steps* the runtime replays on CuPy's current stream:

- ``Launch``: a kernel of the module with a grid, a block and pointer arguments;
- ``Memset``: zero bytes (outputs of ``scatter_add`` and ``pad``);
- ``Gemm``: a matrix product through cuBLAS (CuPy's ``matmul``) on strided views;
- ``Call``: another function's steps, on its operands' memory.

Pointer arguments are ``(storage, byte offset)`` pairs, resolved at call time against
the call's inputs, outputs, workspace and constants (storage ``STATUS``: the failure
status words). Nothing here runs on a device: a module can be rendered, compiled
(``nvrtc.compile_cubin``) and its steps inspected anywhere.

The emitters (``emit.py``) render one op each, from the locations ``layout.py``
decided; this module holds what they share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from yota.ir.core import Function, Value

from .cexpr import PRELUDE
from .kernel import (
    Access,
    Config,
    Kernel,
    named,
    normalize,
    render_elementwise,
    render_reduction,
    render_stage2,
    schedule,
    size_generic,
)
from .layout import ALIGN, Layout, Loc, build_layout
from .special import STATUS_HELPERS

STATUS = -2  # the storage number of the status words
Ref = tuple[int, int]  # (storage, byte offset)


@dataclass(frozen=True)
class Launch:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Ref, ...]
    scalars: tuple[int, ...] = ()  # integer parameters after the pointers


@dataclass(frozen=True)
class Memset:
    ref: Ref
    nbytes: int


@dataclass(frozen=True)
class View:
    ref: Ref
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: np.dtype


@dataclass(frozen=True)
class Gemm:
    a: View
    b: View
    out: View


@dataclass(frozen=True)
class Call:
    callee: str
    ins: tuple[Ref, ...]
    outs: tuple[Ref, ...]
    ws: Ref


Step = Launch | Memset | Gemm | Call


@dataclass
class FnPlan:
    name: str
    storages: list[Any]
    steps: list[Step]
    ws_bytes: int


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

    def kernel(self, template: str, prefix: str = "y") -> str:
        """Add a kernel (source with ``NAME``); returns its name."""
        name, src = named(template, prefix)
        self.kernels.setdefault(name, src)
        return name

    def failure(self, record: dict[str, Any]) -> int:
        self.failures.append(record)
        return len(self.failures)

    def function(self, fn: Function) -> FnPlan:
        if fn.name not in self.plans:
            self.plans[fn.name] = FnGen(self, fn).run()
        return self.plans[fn.name]

    def source(self) -> str:
        return module_source(self.kernels.values())


def module_source(kernels: Any) -> str:
    return "\n\n".join([PRELUDE + STATUS_HELPERS, *kernels]) + "\n"


def lower_module(fn: Function, cfg: Config) -> Module:
    mod = Module(cfg, callees=fn.all_callees(), name=fn.name, main=fn.name,
                 inputs=list(fn.input_types), outputs=list(fn.output_types),
                 labels=list(fn.input_labels))
    mod.plans[fn.name] = FnGen(mod, fn).run()
    return mod


class FnGen:
    """The lowering of one IR function."""

    def __init__(self, mod: Module, fn: Function) -> None:
        self.mod, self.fn = mod, fn
        self.cfg = mod.cfg
        self.lay: Layout = build_layout(fn)
        self.steps: list[Step] = []
        self.scratch_used = 0
        self.scratch_max = 0
        self.const_base = len(mod.consts)
        mod.consts.extend(self.lay.consts)
        self.op_index = 0

    def run(self) -> FnPlan:
        from .emit import EMITTERS, emit_output_copy

        for i, op in enumerate(self.fn.ops):
            self.op_index = i
            self.scratch_used = 0
            EMITTERS[op.name](self, op)
        for j, v in self.lay.out_copies:
            emit_output_copy(self, j, v)
        storages = [s if s.kind != "const" else type(s)("const", s.index + self.const_base,
                                                         s.nbytes) for s in self.lay.storages]
        return FnPlan(self.fn.name, storages, self.steps,
                      self.lay.ws_bytes + self.scratch_max)

    # -- memory ----------------------------------------------------------------------------
    def loc(self, v: Value) -> Loc:
        return self.lay.loc[v]

    def ref(self, loc: Loc, dtype: np.dtype, extra: int = 0) -> Ref:
        return (loc.storage, (loc.offset + extra) * np.dtype(dtype).itemsize)

    def scratch(self, nbytes: int) -> Ref:
        """Workspace bytes that live only while the current op runs."""
        off = self.lay.ws_bytes + self.scratch_used
        self.scratch_used += -(-max(nbytes, 1) // ALIGN) * ALIGN
        self.scratch_max = max(self.scratch_max, self.scratch_used)
        return (self.lay.add_storage("ws", off, nbytes), 0)

    def fresh(self, v: Value) -> Loc:
        """A contiguous scratch region for ``v`` (lives while the current op runs)."""
        from .kernel import contiguous_strides

        st, _ = self.scratch(v.type.nbytes)
        return Loc(st, 0, contiguous_strides(v.shape))

    # -- kernels -----------------------------------------------------------------------------
    def access(self, args: KernelArgs, loc: Loc, dtype: np.dtype,
               strides: tuple[int, ...] | None = None) -> Access:
        return Access(args.param(loc.storage), loc.offset,
                      loc.strides if strides is None else tuple(strides), np.dtype(dtype))

    def launch(self, k: Kernel, args: KernelArgs) -> None:
        """Render, name and schedule kernel ``k`` (and its second stage, if any)."""
        if k.size() == 0 and not (k.reductions and _kept_size(k) > 0):
            return
        k = normalize(k)
        k, refs = _rebase(k, args.refs)
        sch = schedule(k, self.cfg)
        block = (self.cfg.block, 1, 1)
        if sch.kind == "elementwise":
            name = self.mod.kernel(render_elementwise(k, "NAME", self.cfg))
            scalars = (k.size(),) if size_generic(k) else ()
            self.steps.append(Launch(name, sch.grid, block, tuple(refs), scalars))
            return
        partials: list[Ref] = []
        if sch.splits > 1:
            from .cexpr import acc_type

            nk = _kept_size(k)
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

    def copy(self, shape: tuple[int, ...], src: Loc, dtype: np.dtype, dst: Loc) -> None:
        if int(np.prod(shape, dtype=np.int64)) == 0:
            return
        args = KernelArgs()
        k = Kernel(tuple(shape), (False,) * len(shape))
        k.store(k.read(self.access(args, src, dtype)), self.access(args, dst, dtype))
        self.launch(k, args)

    def special(self, template: str, grid: tuple[int, int, int], refs: list[Ref],
                block: int | None = None) -> None:
        name = self.mod.kernel(template)
        self.steps.append(Launch(name, grid, (block or self.cfg.block, 1, 1), tuple(refs)))

    def grid_for(self, n: int) -> tuple[int, int, int]:
        return (max(1, min(-(-n // self.cfg.block), self.cfg.max_grid)), 1, 1)


def _acc_np(c: str) -> Any:
    return {"int": np.int32, "long long": np.int64, "float": np.float32,
            "double": np.float64}[c]


def _kept_size(k: Kernel) -> int:
    return int(np.prod([d for d, r in zip(k.domain, k.reduce, strict=True) if not r]))


class KernelArgs:
    """The pointer parameters of one kernel launch: one per distinct storage."""

    def __init__(self) -> None:
        self.refs: list[Ref] = []
        self.by_storage: dict[int, int] = {}

    def param(self, storage: int) -> int:
        if storage not in self.by_storage:
            self.by_storage[storage] = len(self.refs)
            self.refs.append((storage, 0))
        return self.by_storage[storage]


def _rebase(k: Kernel, refs: list[Ref]) -> tuple[Kernel, list[Ref]]:
    """Move each parameter's lowest element offset into its pointer (the kernel text then
    depends only on relative offsets, so equal kernels at other offsets are shared);
    negative strides (flips) keep the lowest element touched at offset >= 0."""
    low: dict[int, int] = {}
    for a in k.accesses():
        lo = a.offset + sum((d - 1) * s for d, s in zip(k.domain, a.strides, strict=True)
                            if s < 0)
        b = lo * a.dtype.itemsize
        low[a.param] = min(low.get(a.param, b), b)
    if any((a.offset * a.dtype.itemsize - low[a.param]) % a.dtype.itemsize
           for a in k.accesses()):
        return k, refs

    def move(a: Access) -> Access:
        return Access(a.param, (a.offset * a.dtype.itemsize - low[a.param]) // a.dtype.itemsize,
                      a.strides, a.dtype)
    new = [(s, off + low.get(j, 0)) for j, (s, off) in enumerate(refs)]
    return k.map_accesses(move), new
