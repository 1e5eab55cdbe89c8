"""``yota.grad``/``yota.compile`` on device arrays, ``yota.to_device``, ``yota-ir cuda``.

Without a GPU, "device arrays" are stand-ins exposing ``__cuda_array_interface__`` over
host memory and the backend runs on the CPU emulation of its kernels
(``emulate.EmuDevice``): the frontend's path (detection, signatures, tracing on host
copies, errors naming argument paths) and the backend's kernels are the real ones.
With a GPU, the same checks run on CuPy arrays (skipped here without one).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest
from click.testing import CliRunner
from support import TESTS
from support.cuda_cases import (
    EXAMPLE_MODELS,
    Linear,
    linear_loss,
    linear_model,
    model_gradients_match,
)
from yota.backends import cuda
from yota.backends.cuda.emulate import emulation_available

import yota
from yota.cli import main as cli_main

EMU = emulation_available()
NVRTC = cuda.nvrtc_available()
GPU = cuda.unavailable() if NVRTC is None else NVRTC
EXAMPLES = TESTS / "cli_examples"


class FakeDeviceArray:
    """Host memory presented as a device array (``__cuda_array_interface__`` + ``get``)."""

    def __init__(self, a: Any) -> None:
        self._a = np.ascontiguousarray(a)
        self.shape, self.dtype = self._a.shape, self._a.dtype

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self._a.__array_interface__["data"][0], False), "strides": None}

    def get(self) -> np.ndarray:
        return self._a.copy()


@pytest.fixture
def emu() -> Any:
    if EMU:
        pytest.skip(EMU)
    # the frontend looks for device arrays only once CuPy is imported (no GPU needed)
    pytest.importorskip("cupy", reason="CuPy is not installed (the cuda extra)")
    from yota.backends.cuda.emulate import EmuDevice

    cuda.use_device(EmuDevice())
    yield
    cuda.use_device(None)


class Pair(NamedTuple):
    a: Any
    s: float


def _fake(m: Linear) -> Linear:
    return Linear(FakeDeviceArray(m.W), FakeDeviceArray(m.b))


# -- to_device -----------------------------------------------------------------------------------
def test_to_device_cpu_walks_structures_and_converts_only_floats() -> None:
    x = {"m": Linear(np.ones((2, 2)), FakeDeviceArray(np.arange(3.0))),
         "p": Pair(np.arange(4), 2.5), "name": "net", "n": 3}
    out = yota.to_device(x, "cpu", dtype=np.float32)
    assert out["m"].W.dtype == np.float32 and out["m"].b.dtype == np.float32
    assert isinstance(out["m"].b, np.ndarray) and out["m"].b.tolist() == [0, 1, 2]
    assert out["p"].a.dtype == np.arange(4).dtype and out["p"].s == 2.5 and type(out["p"]) is Pair
    assert out["name"] == "net" and out["n"] == 3
    assert x["m"].W.dtype == np.float64  # the original is not changed
    kept = yota.to_device(x, "cpu")
    assert kept["m"].W.dtype == np.float64
    with pytest.raises(yota.YotaError, match="'cuda' or 'cpu'"):
        yota.to_device(x, "tpu")


# -- grad and compile on device arrays --------------------------------------------------------------
def test_grad_on_device_arrays_matches_the_cpu_backend(emu: Any) -> None:
    m, X = linear_model(np.random.default_rng(0))
    v0, g0 = yota.grad(linear_loss, m, X)
    v1, g1 = yota.grad(linear_loss, _fake(m), FakeDeviceArray(X))
    assert np.isclose(float(v1), float(v0), rtol=1e-12)
    for k in (("W",), ("b",)):
        np.testing.assert_allclose(np.asarray(g1.flat[0][k]), g0.flat[0][k], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(g1[1]), g0[1], rtol=1e-12, atol=1e-14)
    v2, _ = yota.grad(linear_loss, _fake(m), FakeDeviceArray(X * 2))  # the cached program, new values
    v3, _ = yota.grad(linear_loss, m, X * 2)
    assert np.isclose(float(v2), float(v3), rtol=1e-12)


def test_mixing_host_and_device_arrays_names_both_paths(emu: Any) -> None:
    m, X = linear_model(np.random.default_rng(1))
    with pytest.raises(yota.YotaError, match=r"m\.W is a NumPy \(host\) array but X is a CuPy"):
        yota.grad(linear_loss, m, FakeDeviceArray(X))
    with pytest.raises(yota.YotaError, match=r"X is a NumPy .* but m\.W is a CuPy"):
        yota.grad(linear_loss, _fake(m), X)
    with pytest.raises(yota.YotaError, match="backend='llvm' runs on the host"):
        yota.grad(linear_loss, _fake(m), FakeDeviceArray(X), backend="llvm")


def test_backend_cuda_forces_the_device_for_host_arrays(emu: Any) -> None:
    m, X = linear_model(np.random.default_rng(2))
    v0, g0 = yota.grad(linear_loss, m, X)
    v1, g1 = yota.grad(linear_loss, m, X, backend="cuda")
    assert g1.tape is not None and np.isclose(float(v1), float(v0), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(g1[1]), g0[1], rtol=1e-12, atol=1e-14)


def test_compile_on_device_arrays(emu: Any) -> None:
    m, X = linear_model(np.random.default_rng(3))
    f = lambda m, X: np.tanh(m.W @ X) * 2.0  # noqa: E731
    cf = yota.compile(f, _fake(m), FakeDeviceArray(X))
    want = np.tanh(m.W @ X) * 2.0
    np.testing.assert_allclose(np.asarray(cf(_fake(m), FakeDeviceArray(X))), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(cf(m, X)), want, rtol=1e-12)  # copied over
    host = yota.compile(f, m, X)
    with pytest.raises(yota.YotaError, match="compiled for NumPy"):
        host(_fake(m), FakeDeviceArray(X))


def test_python_floats_go_with_device_arrays(emu: Any) -> None:
    x = np.linspace(-1, 1, 7)
    v, g = yota.grad(lambda x, s: np.sum(np.exp(x * s)), FakeDeviceArray(x), 0.5)
    assert np.isclose(float(v), np.sum(np.exp(x * 0.5)))
    assert isinstance(g[1], float) and np.isclose(g[1], np.sum(x * np.exp(x * 0.5)))


# -- example models: gradients vs the CPU backend -------------------------------------------------------
@pytest.mark.parametrize("name", list(EXAMPLE_MODELS))
def test_example_model_gradients_match_cpu_backend_emulated(name: str) -> None:
    if EMU:
        pytest.skip(EMU)
    from yota.backends.cuda.emulate import EmuDevice

    assert model_gradients_match(EmuDevice(), name) is None


# -- yota-ir cuda --------------------------------------------------------------------------------
def test_cli_prints_the_cuda_source() -> None:
    res = CliRunner().invoke(cli_main, ["cuda", str(EXAMPLES / "model.py") + ":loss",
                                        "--example", "example"])
    assert res.exit_code == 0, res.output
    assert 'extern "C" __global__' in res.output and "y_block_reduce" in res.output


@pytest.mark.skipif(NVRTC is not None, reason=f"NVRTC unavailable: {NVRTC}")
def test_cli_check_compiles_with_nvrtc() -> None:
    res = CliRunner().invoke(cli_main, ["cuda", str(EXAMPLES / "mlp.py") + ":loss",
                                        "--example", "example", "--check", "--arch", "sm_80"])
    assert res.exit_code == 0, res.output
    assert "compiles for sm_80" in res.output


# -- on a GPU --------------------------------------------------------------------------------------
@pytest.mark.skipif(GPU is not None, reason=f"needs a CUDA GPU: {GPU}")
def test_grad_on_cupy_arrays() -> None:
    import cupy as cp

    m, X = linear_model(np.random.default_rng(5))
    v0, g0 = yota.grad(linear_loss, m, X)
    v1, g1 = yota.grad(linear_loss, yota.to_device(m, "cuda"), cp.asarray(X))
    assert isinstance(g1[1], cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(g1[0].W), g0[0].W, rtol=1e-10)
    assert np.isclose(float(v1), float(v0), rtol=1e-12)
    for name in EXAMPLE_MODELS:
        assert model_gradients_match(cuda.default_device(), name, cp.asnumpy) is None
