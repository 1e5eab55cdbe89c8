"""Backends: turn an ir.Function into something that runs."""
