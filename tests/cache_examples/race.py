"""Several processes writing, reading and removing the same cache keys at once.

    python race.py grad ROUNDS WORKERS     # each round, every worker compiles the same
                                           # new program (a static argument = the round)
    python race.py store ROUNDS WORKERS    # every worker stores, reads and removes one
                                           # key in a tight loop

$YOTA_CACHE_DIR is the shared cache. Prints a JSON summary; exit status 1 if any worker
saw a torn or corrupt entry, a wrong result, or a cache warning.
"""

import json
import multiprocessing as mp
import sys
import warnings


def loss(x, k):
    return np.sum(np.tanh(x) * k)  # noqa: F821 - np is imported in the worker


def grad_worker(rounds, barrier, queue):
    import numpy as np

    import yota

    globals()["np"] = np
    x = np.linspace(-1.0, 1.0, 7)
    bad = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for r in range(rounds):
            barrier.wait()
            f = lambda x, k: loss(x, k)  # noqa: E731 - a new function: no in-memory cache
            val, g = yota.grad(f, x, r + 1)
            want = (r + 1) * (1 - np.tanh(x) ** 2)
            if not (np.allclose(g[0], want) and np.isclose(val, (r + 1) * np.tanh(x).sum())):
                bad.append(f"round {r}: wrong result")
    bad += [str(w.message) for w in caught if issubclass(w.category, yota.cache.CacheWarning)]
    queue.put({"bad": bad, "stats": vars(yota.cache.stats)})


def store_worker(rounds, barrier, queue):
    import numpy as np
    from yota.backends import llvm

    import yota
    from yota.cache import BadEntry, default_cache, make_key
    from yota.pipeline import program_ir

    fn, sig = program_ir(lambda x: np.sum(x * x), (np.ones(3),))
    key = make_key(fn, None, kind="grad", signature=sig)
    art = llvm.compile(fn).artifact
    cache, bad, hits = default_cache(), [], 0
    assert cache.problem() is None  # creates the directories
    barrier.wait()
    for r in range(rounds):
        try:
            cache.store(key, fn, art.meta, art.object_code)
            entry = cache.read(key.hex)
            if entry is not None:
                hits += 1
                if entry.files["object.o"] != art.object_code:
                    bad.append(f"round {r}: another object")
            if r % 3 == 0:
                cache.remove(key.hex)
        except (BadEntry, OSError) as e:
            bad.append(f"round {r}: {type(e).__name__}: {e}")
    queue.put({"bad": bad, "hits": hits, "stats": vars(yota.cache.stats)})


def main():
    mode, rounds, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    target = grad_worker if mode == "grad" else store_worker
    procs = [ctx.Process(target=target, args=(rounds, barrier, queue)) for _ in range(workers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    print(json.dumps({"results": results, "exitcodes": [p.exitcode for p in procs]}))
    ok = all(not r["bad"] for r in results) and all(p.exitcode == 0 for p in procs)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
