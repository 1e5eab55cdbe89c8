"""``python -m yota.cli``: the ``yota-ir`` command."""

from yota.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
