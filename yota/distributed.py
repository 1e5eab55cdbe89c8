"""``yota.distributed``: data-parallel gradients over MPI (``yota.grad(..., comm=comm)``)."""

from __future__ import annotations

__all__: list[str] = []
