"""Call a library built by yota.aot from Python with ctypes and NumPy only (no Yota, no
llvmlite), as a program shipped without Yota would.

    python call_so.py LIB.so MANIFEST.json INPUTS.npz OUTPUTS.npz [--blas]

--blas: hand the library NumPy's bundled OpenBLAS GEMMs (<lib>_set_blas).
"""

import ctypes
import glob
import json
import os
import sys

import numpy as np

lib_path, manifest_path, in_path, out_path = sys.argv[1:5]
desc = json.load(open(manifest_path))
lib = ctypes.CDLL(lib_path)
if "--blas" in sys.argv:
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "*openblas*"))
    blas = ctypes.CDLL(libs[0])
    set_blas = getattr(lib, desc["set_blas"])
    set_blas.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    set_blas(ctypes.cast(blas.scipy_cblas_sgemm64_, ctypes.c_void_p),
             ctypes.cast(blas.scipy_cblas_dgemm64_, ctypes.c_void_p))

[fdesc] = desc["functions"]
fn = getattr(lib, fdesc["name"])
fn.restype = ctypes.c_int
fn.argtypes = [ctypes.c_void_p] * (len(fdesc["inputs"]) + len(fdesc["outputs"]))
data = np.load(in_path)
ins = [np.ascontiguousarray(data[f"arr_{i}"], dtype=np.dtype(a["dtype"]))
       for i, a in enumerate(fdesc["inputs"])]
outs = [np.empty(a["shape"], np.dtype(a["dtype"])) for a in fdesc["outputs"]]
rc = fn(*[a.ctypes.data for a in ins + outs])
np.savez(out_path, *outs)
print(json.dumps({"rc": rc, "llvmlite": "llvmlite" in sys.modules, "yota": "yota" in sys.modules}))
