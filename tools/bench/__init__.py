"""Benchmark suite: Yota against a hand-written NumPy gradient, HIPS autograd, JAX and PyTorch.

Every system computes the value and the gradient of the same scalar loss on the same inputs,
in one process. Each system's answer is checked against the hand-written NumPy gradient
before it is timed (a mismatch is reported, not timed). Timing: first call (trace +
compile + run) separately, then warm-up, then interleaved rounds (every system once per
round, the order rotating, each sample started once no thread of the process still runs:
``--settle``), reported as median and quartiles. The machine's memory
bandwidth (a STREAM-style triad) and BLAS rate are measured in the same run, and each
workload's time is also given as a multiple of its physical bound.

    python tools/bench.py                       # full run: Markdown on stdout, JSON file
    python tools/bench.py --quick               # smoke run on tiny sizes
    python tools/bench.py --only W3,W5 --systems numpy,yota,jax --backend interp
    python tools/bench.py --load 2              # the same with 2 busy processes running
    python tools/bench.py --transforms          # jvp, vmap, hessian vs JAX (bench_transforms.py)

Peers are used when importable (``pip install -e '.[bench]'`` gives jax and autograd;
``pip install torch==2.13.0`` the CPU build of PyTorch); a missing one is skipped with
its reason. Progress goes to stderr.

The package, one job per module: ``workloads`` (the losses, their hand-written gradients,
inputs and sizes: what the tests and the other tools import), ``systems`` (NumPy, Yota
per backend, the peers), ``check`` (answers against the hand-written gradient),
``timing`` (rounds, samples, memory), ``machine`` (bandwidth, BLAS rate, bounds, the
run's meta), ``load`` (``--load``), ``runner`` (one workload), ``report`` (Markdown and
JSON), ``cli`` (the command line; ``tools/bench.py`` runs ``cli.main``).
"""
