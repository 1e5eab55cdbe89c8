"""``python -m yota`` runs the ``yota-ir`` command-line tool."""

from yota.cli import main

if __name__ == "__main__":
    main(prog_name="yota-ir")
