"""A compiled CUDA program as bytes a cache can store, and back, without NVRTC.

``Artifact.object_code`` is the cubin (machine code for the device's ``sm_XX``) followed by
the bytes of the module's constants; ``Artifact.meta`` is plain JSON: the lowered module
(kernel names and sources, per-function steps, storages, failure records, signature), the
cubin's size and SHA-256, each constant's dtype, shape and place, and the target it was
built for (arch, NVRTC and driver versions, launch configuration). Never pickle.

Kernel sources travel with the steps so that a device that does not run cubins (the CPU
emulation, ``emulate.EmuDevice``) can still run a loaded artifact.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
from yota.ir.errors import YotaError
from yota.ir.types import TensorType

from ..artifact import Artifact as BaseArtifact
from ..layout import Storage
from ..program import Call, Callback, FnPlan, Gemm, Launch, Linalg, Loop, Memset, View
from .kernel import Config
from .lower import Module

FORMAT = 1


class Artifact(BaseArtifact):
    """A cubin plus constants (``object_code``) and the JSON that launches it (``meta``)."""

    MAGIC = b"YOTACUB1"
    KIND = "Yota CUDA"

    @property
    def cubin(self) -> bytes:
        n = self.meta["cubin"]["bytes"]
        cubin = self.object_code[:n]
        if len(cubin) != n or hashlib.sha256(cubin).hexdigest() != self.meta["cubin"]["sha256"]:
            raise YotaError("the artifact's cubin is truncated or altered")
        return cubin


# -- plain values (tuples stay tuples: guard messages print them) ---------------------------
def _enc(v: Any) -> Any:
    if isinstance(v, tuple):
        return {"tuple": [_enc(x) for x in v]}
    if isinstance(v, list):
        return [_enc(x) for x in v]
    if isinstance(v, dict):
        return {"dict": [[_enc(k), _enc(x)] for k, x in v.items()]}
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return {"array": v.tolist(), "dtype": v.dtype.str}
    if isinstance(v, np.dtype):
        return {"dtype": v.str}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"cannot store {type(v).__name__} {v!r} in a CUDA artifact")


def _dec(v: Any) -> Any:
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if isinstance(v, dict):
        if "tuple" in v:
            return tuple(_dec(x) for x in v["tuple"])
        if "dict" in v:
            return {_dec(k): _dec(x) for k, x in v["dict"]}
        if "array" in v:
            return np.array(v["array"], np.dtype(v["dtype"]))
        if "dtype" in v:
            return np.dtype(v["dtype"])
    return v


def _ref(r: Any) -> list[int]:
    return [int(r[0]), int(r[1])]


def _view(v: View) -> dict[str, Any]:
    return {"ref": _ref(v.ref), "shape": list(v.shape), "strides": list(v.strides),
            "dtype": np.dtype(v.dtype).str}


def _unview(d: dict[str, Any]) -> View:
    return View(tuple(d["ref"]), tuple(d["shape"]), tuple(d["strides"]), np.dtype(d["dtype"]))


def _step(s: Any) -> dict[str, Any]:
    if type(s) is Launch:
        return {"launch": s.name, "grid": list(s.grid), "block": list(s.block),
                "args": [_ref(r) for r in s.args], "scalars": [int(x) for x in s.scalars]}
    if type(s) is Memset:
        return {"memset": _ref(s.ref), "nbytes": int(s.nbytes)}
    if type(s) is Gemm:
        return {"gemm": [_view(s.a), _view(s.b), _view(s.out)]}
    if type(s) is Linalg:
        return {"linalg": s.op, "attrs": [[k, bool(v)] for k, v in s.attrs],
                "ins": [_view(v) for v in s.ins], "outs": [_view(v) for v in s.outs],
                "failure": int(s.failure)}
    if type(s) is Callback:
        return {"callback": s.fn, "static": s.static, "ins": [_view(v) for v in s.ins],
                "outs": [_view(v) for v in s.outs], "loc": s.loc}
    if type(s) is Call:
        return {"call": s.callee, "ins": [_ref(r) for r in s.ins],
                "outs": [_ref(r) for r in s.outs], "ws": _ref(s.ws)}
    if type(s) is Loop:
        return {"loop": s.callee, "length": int(s.length), "reverse": bool(s.reverse),
                "carries": [[_ref(a), _ref(b)] for a, b in s.carries],
                "stacked": [[_ref(r), int(n)] for r, n in s.stacked],
                "invariants": [_ref(r) for r in s.invariants],
                "outs": [[_ref(r), int(n)] for r, n in s.outs], "ws": _ref(s.ws)}
    raise TypeError(f"unknown step {s!r}")


def _unstep(d: dict[str, Any]) -> Any:
    if "launch" in d:
        return Launch(d["launch"], tuple(d["grid"]), tuple(d["block"]),
                      tuple(tuple(r) for r in d["args"]), tuple(d["scalars"]))
    if "memset" in d:
        return Memset(tuple(d["memset"]), d["nbytes"])
    if "gemm" in d:
        return Gemm(*(_unview(v) for v in d["gemm"]))
    if "linalg" in d:
        return Linalg(d["linalg"], tuple((k, bool(v)) for k, v in d["attrs"]),
                      tuple(_unview(v) for v in d["ins"]),
                      tuple(_unview(v) for v in d["outs"]), int(d["failure"]))
    if "callback" in d:
        return Callback(d["callback"], d["static"], tuple(_unview(v) for v in d["ins"]),
                        tuple(_unview(v) for v in d["outs"]), d["loc"])
    if "loop" in d:
        return Loop(d["loop"], int(d["length"]), bool(d["reverse"]),
                    tuple((tuple(a), tuple(b)) for a, b in d["carries"]),
                    tuple((tuple(r), int(n)) for r, n in d["stacked"]),
                    tuple(tuple(r) for r in d["invariants"]),
                    tuple((tuple(r), int(n)) for r, n in d["outs"]), tuple(d["ws"]))
    return Call(d["call"], tuple(tuple(r) for r in d["ins"]),
                tuple(tuple(r) for r in d["outs"]), tuple(d["ws"]))


def _type(t: TensorType) -> list[Any]:
    return [np.dtype(t.dtype).str, list(t.shape)]


# -- module <-> artifact -------------------------------------------------------------------
def pack(module: Module, cubin: bytes, target: dict[str, Any]) -> Artifact:
    """The artifact of ``module`` with its compiled ``cubin`` for ``target`` (a device key)."""
    consts, offset = [], len(cubin)
    data = [cubin]
    for c in module.consts:
        a = np.ascontiguousarray(c)
        raw = a.tobytes()
        consts.append({"dtype": a.dtype.str, "shape": list(a.shape), "offset": offset,
                       "bytes": len(raw)})
        data.append(raw)
        offset += len(raw)
    cfg = module.cfg
    meta = {
        "format": FORMAT,
        "name": module.name,
        "main": module.main,
        "config": {"block": cfg.block, "target_blocks": cfg.target_blocks,
                   "max_grid": cfg.max_grid, "fast_math": cfg.fast_math},
        "kernels": [[n, src] for n, src in module.kernels.items()],
        "plans": [{"name": p.name, "ws_bytes": int(p.ws_bytes),
                   "storages": [[s.kind, int(s.index), int(s.nbytes)] for s in p.storages],
                   "steps": [_step(s) for s in p.steps]} for p in module.plans.values()],
        "consts": consts,
        "failures": _enc(module.failures),
        "inputs": [_type(t) for t in module.inputs],
        "outputs": [_type(t) for t in module.outputs],
        "labels": list(module.labels),
        "cubin": {"bytes": len(cubin), "sha256": hashlib.sha256(cubin).hexdigest()},
        "target": target,
    }
    json.dumps(meta)  # fails here (TypeError), not in the cache, if something is not plain
    return Artifact(b"".join(data), meta)


def unpack(art: Artifact) -> Module:
    """The lowered module an artifact describes (its constants as arrays)."""
    m = art.meta
    if m.get("format") != FORMAT:
        raise YotaError(f"CUDA artifact format {m.get('format')!r}, this Yota reads {FORMAT}")
    mod = Module(Config(**m["config"]), name=m["name"], main=m["main"],
                 inputs=[TensorType(np.dtype(d), tuple(s)) for d, s in m["inputs"]],
                 outputs=[TensorType(np.dtype(d), tuple(s)) for d, s in m["outputs"]],
                 labels=list(m["labels"]))
    mod.kernels = {n: src for n, src in m["kernels"]}
    mod.plans = {p["name"]: FnPlan(p["name"], [Storage(k, i, n) for k, i, n in p["storages"]],
                                   [_unstep(s) for s in p["steps"]], p["ws_bytes"])
                 for p in m["plans"]}
    code = art.object_code
    for c in m["consts"]:
        raw = code[c["offset"]:c["offset"] + c["bytes"]]
        if len(raw) != c["bytes"]:
            raise YotaError("the artifact's constants are truncated")
        mod.consts.append(np.frombuffer(raw, np.dtype(c["dtype"])).reshape(c["shape"]).copy())
    mod.failures = _dec(m["failures"])
    return mod
