"""Yota: a reverse-mode automatic-differentiation compiler for NumPy code."""
