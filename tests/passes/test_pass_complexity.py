"""Every compile stage does work (near) linear in the program: counted, not timed.

Work is the number of Python lines a stage executes (``sys.settrace`` line events, each
loop iteration included), on synthetic programs with nothing repeated, at two sizes ``n``
and ``2n``: the count may at most double, within ``RATIO``. A stage that is O(n log n)
gives 2 * log(2n) / log(n) < 2.25 at these sizes (a few hundred ops); one quadratic
anywhere in Python gives about 4 (the fusion pass's old cycle check: 3.8; the memory
plan's old free-list scan: 2.9). Work done in C (``x in tuple``, LLVM) is not seen by
the count; the fusion pass's own counter and the size of the LLVM functions are checked
directly, and the code generator's segmenting is checked to compute the same values.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yota.backends
import yota.ir
from support.irgen import close_results, example_inputs
from yota.backends import llvm
from yota.backends.llvm import abi
from yota.backends.llvm import lower as llvm_lower
from yota.backends.llvm.abi import ENTRY, ENTRY_OBJ
from yota.backends.llvm.module import lower_module
from yota.backends.llvm.runtime.target import host
from yota.ir import Builder, Function, TensorType, run, verify
from yota.ir.autodiff import vjp
from yota.ir.passes import PIPELINE, dynorder, fuse, optimize
from yota.ir.passes.fuse import Grouping
from yota.ir.passes.plan_memory import sink_writes

RATIO = 2.3

ACTS = ["tanh", "sin", "exp", "square", "neg"]


def deep_mlp(layers: int, batch: int = 4) -> Function:
    """Layers of random widths and activations (some subtract their rows' maximum), each
    with its own weights and bias, nothing repeated: ``sum(h**2)``."""
    rnd = random.Random(7)
    b = Builder("mlp")
    widths = [rnd.randint(3, 15) for _ in range(layers + 1)]
    params = [(b.input(TensorType("f64", (m, n)), f"W{k}"),
               b.input(TensorType("f64", (n,)), f"b{k}"))
              for k, (m, n) in enumerate(zip(widths, widths[1:], strict=False))]
    h = b.input(TensorType("f64", (batch, widths[0])), "x")
    for w, bias in params:
        n = w.shape[1]
        h = b.emit(rnd.choice(ACTS),
                   b.emit("add", b.matmul(h, w), b.broadcast(bias, shape=(batch, n))))
        if rnd.random() < 0.3:
            m = b.reshape(b.max(h, axes=(1,)), shape=(batch, 1))
            h = b.sub(h, b.broadcast(m, shape=(batch, n)))
    return b.build([b.sum(b.square(h), axes=(0, 1))])


def writes_chain(n: int) -> Function:
    """A buffer filled element by element (``buf[i] = x[i] * c_i``), then ``sum(buf**2)``."""
    b = Builder("writes")
    x = b.input(TensorType("f64", (n,)), "x")
    buf = b.const(0.0, "f64", (n,))
    for i in range(n):
        xi = b.slice(x, start=(i,), stop=(i + 1,), step=(1,))
        c = b.const(float(1 + i % 5), "f64", (1,))
        buf = b.update_slice(buf, b.mul(xi, c), start=(i,), stop=(i + 1,), step=(1,))
    return b.build([b.sum(b.square(buf), axes=(0,))])


def shared_weight(n: int) -> Function:
    """Products of ``n`` inputs with one weight, each through its own op:
    ``sum_i sum(f_i(x_i @ W))`` (matmul batching's shared operand and summed products)."""
    b = Builder("shared")
    w = b.input(TensorType("f64", (6, 5)), "W")
    total = None
    for i in range(n):
        x = b.input(TensorType("f64", (3, 6)), f"x{i}")
        y = b.sum(b.emit(ACTS[i % len(ACTS)], b.matmul(x, w)), axes=(0, 1))
        total = y if total is None else b.emit("add", total, y)
    assert total is not None
    return b.build([total])


def weight_banks(layers: int, batch: int = 4, banks: int = 3) -> Function:
    """An MLP whose layers read blocks of a few weight matrices (``W_j[:a, :b]``, random
    ``j``, ``a``, ``b``): products sharing an operand all along the program, each group
    dependent through the chain (matmul batching's far-apart groups)."""
    rnd = random.Random(11)
    b = Builder("banks")
    ws = [b.input(TensorType("f64", (8, 8)), f"W{j}") for j in range(banks)]
    widths = [rnd.randint(2, 8) for _ in range(layers + 1)]
    h = b.input(TensorType("f64", (batch, widths[0])), "x")
    for m, n in zip(widths, widths[1:], strict=False):
        w = b.slice(rnd.choice(ws), start=(0, 0), stop=(m, n), step=(1, 1))
        h = b.emit(rnd.choice(ACTS), b.matmul(h, w))
    return b.build([b.sum(b.square(h), axes=(0, 1))])


FAMILIES: dict[str, tuple[Callable[[int], Function], int]] = {
    "mlp": (deep_mlp, 12), "writes": (writes_chain, 30), "shared": (shared_weight, 16),
    "banks": (weight_banks, 30),
}


OWN = tuple(str(Path(pkg.__file__).parent) for pkg in (yota.ir, yota.backends))


def count_lines(f: Callable[..., Any], *args: Any) -> tuple[Any, int]:
    """``f(*args)`` and the number of Python lines it executed in Yota's IR and backends
    (a call into another library counts as one line)."""
    n = 0

    def line(frame: Any, event: str, arg: Any) -> Any:
        nonlocal n
        n += 1
        return line

    def call(frame: Any, event: str, arg: Any) -> Any:
        nonlocal n
        n += 1
        return line if frame.f_code.co_filename.startswith(OWN) else None

    sys.settrace(call)
    try:
        out = f(*args)
    finally:
        sys.settrace(None)
    return out, n


def stage_counts(fn: Function) -> dict[str, int]:
    """Lines executed by each stage compiling ``fn``'s gradient: vjp, every pass of the
    pipeline (numbered: passes repeat), the llvm backend's lowering. (Rolling, the loop
    pass's, is not counted here.)"""
    counts: dict[str, int] = {}
    g, counts["vjp"] = count_lines(vjp, fn, [i for i, v in enumerate(fn.inputs)
                                             if v.dtype.kind == "f"])
    for k, (name, _) in enumerate(PIPELINE):
        g, counts[f"{k:02d} {name}"] = count_lines(optimize, g, [name])
    _, counts["llvm lower"] = count_lines(lower_module, g, host(), llvm._options(1))
    return counts


@cache
def measured(family: str) -> tuple[dict[str, int], dict[str, int]]:
    make, n = FAMILIES[family]
    return stage_counts(make(n)), stage_counts(make(2 * n))


STAGES = ["vjp", *[f"{k:02d} {name}" for k, (name, _) in enumerate(PIPELINE)], "llvm lower"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_stage_at_most_doubles_its_work_when_the_program_doubles(family: str) -> None:
    small, big = measured(family)
    ratios = {s: big[s] / small[s] for s in STAGES}
    slow = {s: f"{r:.2f}" for s, r in ratios.items() if r > RATIO}
    assert not slow, f"{family}: work ratios above {RATIO} for twice the program: {slow}"
    assert all(r > 1.2 for s, r in ratios.items() if small[s] > 20_000), ratios  # real work


@pytest.mark.parametrize("family", list(FAMILIES))
def test_rolling_at_most_doubles_its_work_when_the_program_doubles(family: str) -> None:
    """``roll`` looks for repeats at every position (candidate periods from the next
    equal op and the next equal run, each compared by prefix hashes): linear, with a
    constant that settles once the program is long enough to offer each position all its
    candidates, hence the larger sizes. (Repeated steps: tests/passes/test_loops.py.)"""
    from yota.ir.passes import PassContext
    from yota.ir.passes.roll import roll

    make, n = FAMILIES[family]
    (_, small), (_, big) = (count_lines(roll, make(k * n), PassContext()) for k in (32, 64))
    assert big / small <= RATIO, f"{family}: {small} -> {big} lines for twice the program"


def grouping_work(fn: Function) -> tuple[int, int]:
    """(ops, fusion's cycle-check work) for ``fn``'s gradient, optimized up to fusion."""
    g = vjp(fn, [i for i, v in enumerate(fn.inputs) if v.dtype.kind == "f"])
    names = [name for name, _ in PIPELINE]
    g = optimize(g, names[:names.index("fuse")])
    grouping = Grouping(list(g.ops))
    grouping.grow()
    grouping.merge_siblings()
    return len(g.ops), grouping.order.visited + grouping.scanned


@pytest.mark.parametrize("family", list(FAMILIES))
def test_fusion_cycle_checks_do_work_per_op_that_does_not_grow(family: str) -> None:
    make, n = FAMILIES[family]
    (ops1, work1), (ops2, work2) = grouping_work(make(n)), grouping_work(make(4 * n))
    assert ops2 > 3.5 * ops1
    assert work2 / ops2 <= 1.3 * work1 / ops1 + 1, (work1 / ops1, work2 / ops2)
    assert work2 / ops2 < 12  # a few edges per op


def brute_force_joined(succ: dict[int, set[int]], a: int, b: int) -> bool:
    """A path of two or more edges between ``a`` and ``b``."""
    for s, t in ((a, b), (b, a)):
        stack = [u for u in succ[s] if u != t]
        seen = set(stack)
        while stack:
            u = stack.pop()
            if u == t:
                return True
            for w in succ[u] - seen:
                seen.add(w)
                stack.append(w)
    return False


@pytest.mark.parametrize("label_bits", [62, 12])
def test_dynamic_order_merges_exactly_when_no_cycle_follows(
        monkeypatch: pytest.MonkeyPatch, label_bits: int) -> None:
    """Random DAGs, random merges: the answer of a brute-force search, edges moved, and a
    valid topological order after each merge (12-bit labels force relabeling)."""
    monkeypatch.setattr(dynorder, "LABEL_BITS", label_bits)
    for trial in range(150):
        rnd = random.Random(trial)
        n = rnd.randint(2, 40)
        p = rnd.random() * 0.3
        edges = [(u, v) for v in range(n) for u in range(v) if rnd.random() < p]
        g = dynorder.DynamicOrder(n, edges)
        succ: dict[int, set[int]] = {u: set() for u in range(n)}
        for u, v in edges:
            succ[u].add(v)
        for _ in range(2 * n):
            if len(succ) < 2:
                break
            a, b = rnd.sample(sorted(succ), 2)
            merged = g.merge(a, b)
            assert merged == (not brute_force_joined(succ, a, b)), (trial, a, b)
            if merged:
                joined = succ[a] | succ.pop(b)
                succ = {u: {a if w == b else w for w in ws} - {u} for u, ws in succ.items()}
                succ[a] = {a if w == b else w for w in joined} - {a}
            assert {u: g.succ[u] for u in succ} == succ
            assert all(g.rank[u] < g.rank[w] for u in succ for w in succ[u])
            assert len({g.rank[u] for u in succ}) == len(succ)


def test_order_list_keeps_order_through_many_insertions_at_one_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Insertions all at one spot exhaust the room between two labels again and again;
    relabeling keeps the labels increasing at amortized O(log n) labels per insertion."""
    monkeypatch.setattr(dynorder, "LABEL_BITS", 20)
    n = 400
    order = dynorder.OrderList(n)
    expect = list(range(n))
    for k in range(1, n // 2):  # move node k to right after node 0, one at a time
        order.remove(k)
        order.insert_after(0, [k])
        expect.remove(k)
        expect.insert(1, k)
    walk, u = [], 0
    while u >= 0:
        walk.append(u)
        u = order.next[u]
    assert walk == expect
    labels = [order.label[u] for u in walk]
    assert labels == sorted(labels) and len(set(labels)) == n
    assert order.relabeled < 40 * n


def max_function_size(fn: Function) -> int:
    """Instructions in the largest LLVM function ``fn`` lowers to, but for the exported
    entries (a few instructions per argument, in a block of their own each)."""
    mg = lower_module(fn, host(), llvm._options(1))
    return max(sum(len(b.instructions) for b in f.blocks) for f in mg.module.functions
               if f.blocks and f.name not in (ENTRY, ENTRY_OBJ))


def test_llvm_functions_stay_bounded_as_the_program_grows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A long program is emitted as segments of ``segment_size`` (here 128, a few dozen
    ops): its LLVM functions (which LLVM's code generator handles in more than linear
    time) do not grow with it."""
    monkeypatch.setattr(llvm_lower.FnGen, "segment_size", 128)
    small, big = (optimize(vjp(deep_mlp(k), list(range(2 * k)))) for k in (16, 64))
    assert len(big.ops) > 3.5 * len(small.ops) > 3.5 * 32
    assert max_function_size(big) < 1.5 * max_function_size(small)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_segmented_programs_compute_what_the_interpreter_does(
        monkeypatch: pytest.MonkeyPatch, family: str) -> None:
    """Segments of a few ops (arguments loaded where first used, status passed up)."""
    monkeypatch.setattr(llvm_lower.FnGen, "segment_size", 10)
    make, n = FAMILIES[family]
    fn = make(n // 4)
    g = optimize(vjp(fn, [i for i, v in enumerate(fn.inputs) if v.dtype.kind == "f"]))
    assert len(g.ops) > 10
    args = example_inputs(g, np.random.default_rng(0))
    exe = llvm.compile(g, threads=1)
    assert ".s3" in exe.llvm_ir
    assert close_results(run(g, *args), exe(*args)) is None


def test_a_long_chain_of_writes_sinks_without_recursion() -> None:
    """Each write moves down to its first reader: 3000 writes, each the next one's
    operand, all pending until the last is read (Python's recursion limit is 1000)."""
    fn = writes_chain(3000)
    out = sink_writes(fn)
    verify(out)
    assert sorted(map(id, out.ops)) == sorted(map(id, fn.ops))
    writes = [i for i, op in enumerate(out.ops) if op.name == "update_slice"]
    assert writes == list(range(writes[0], writes[0] + 3000))  # together, before the sum


def test_a_program_of_many_arguments_takes_them_packed() -> None:
    """520 inputs and 520 outputs (more than the 1024 arguments a ctypes call takes): the
    entries take one array of them (``abi.packed``) and check them in loops, so their
    code does not grow with them; compiled and loaded alike."""
    b = Builder("many")
    xs = [b.input(TensorType("f64", (3,)), f"x{i}") for i in range(520)]
    fn = b.build([b.mul(x, b.const(float(i % 7), "f64", (3,))) for i, x in enumerate(xs)])
    assert abi.packed(len(fn.inputs) + len(fn.outputs) + 1)
    args = [np.arange(3.0) + i for i in range(520)]
    want = run(fn, *args)
    exe = llvm.compile(fn, threads=1)
    assert close_results(want, exe(*args)) is None
    assert max_function_size(fn) < 2000
    again = llvm.load(llvm.save(exe))
    strided = [np.repeat(a, 2)[::2] for a in args]  # not contiguous: converted, called again
    assert close_results(want, again(*strided)) is None


def test_kernels_stop_growing_at_the_size_cap() -> None:
    """1200 ops all reading one value join one group by sibling merging, up to
    ``MAX_MEMBERS`` ops a kernel (LLVM compiles one huge function in more than linear
    time); the program computes the same."""
    b = Builder("wide")
    x = b.input(TensorType("f64", (5,)), "x")
    ys = [b.emit(ACTS[i % len(ACTS)], b.mul(x, b.const(1.0 + i / 600, "f64", (5,))))
          for i in range(600)]
    fn = b.build(ys)
    out = optimize(fn, ["fuse"])
    bodies = [out.callees[op.attrs["callee"]] for op in out.ops if op.name == "fused"]
    sizes = [sum(o.name not in ("const", "broadcast") for o in body.ops) for body in bodies]
    assert max(sizes) == fuse.MAX_MEMBERS and sum(sizes) == 1200
    args = example_inputs(fn, np.random.default_rng(1))
    assert close_results(run(fn, *args), run(out, *args)) is None
