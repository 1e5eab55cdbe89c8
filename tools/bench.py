"""The benchmark suite's entry point: ``python tools/bench.py [--quick] [--only W3,...]
[--systems ...] [--backend ...] [--load N] [--compile | --transforms]`` (``--help`` for all
options). The suite is the package ``tools/bench/`` beside this script (its docstring says
what is measured and how). Run as a script, this file's folder leads ``sys.path``, so
``bench`` imports that package: a package directory wins over a module of the same name.
"""

from bench.cli import main

if __name__ == "__main__":
    main()
