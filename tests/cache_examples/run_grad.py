"""Run yota.grad on model.loss in a fresh process and print what happened, as JSON.

    python run_grad.py DIR [--power N] [--no-cache] [--forward]

DIR holds model.py and its helpers; the cache is $YOTA_CACHE_DIR.
"""

import hashlib
import json
import sys
import time
import warnings

t0 = time.perf_counter()
directory = sys.argv[1]
sys.path.insert(0, directory)
power = int(sys.argv[sys.argv.index("--power") + 1]) if "--power" in sys.argv else 2

import model  # noqa: E402
import numpy as np  # noqa: E402
from yota.backends import llvm  # noqa: E402

import yota  # noqa: E402

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    args = model.example(power)
    if "--forward" in sys.argv:
        f = yota.compile(model.loss, *args, cache="--no-cache" not in sys.argv)
        outs = [np.asarray(f(*args))]
    else:
        val, g = yota.grad(model.loss, *args, cache="--no-cache" not in sys.argv)
        outs = [np.asarray(val), g[0].W, g[0].b, g[1]]
h = hashlib.sha256()
for o in outs:
    h.update(np.ascontiguousarray(o).tobytes())
print(json.dumps({
    "cache": vars(yota.cache.stats), "llvm": dict(llvm.stats), "traces": yota.stats.traces,
    "value": float(outs[0]), "sha": h.hexdigest(),
    "warnings": [str(w.message) for w in caught if issubclass(w.category, yota.cache.CacheWarning)],
    "seconds": time.perf_counter() - t0,
}))
