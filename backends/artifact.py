"""The on-disk form of a compiled program, shared by the backends: an 8-byte magic naming
the backend's format, a JSON header (``meta``), then the machine code (``object_code``).

JSON only, never pickle: loading an artifact must not execute Python data.
"""

from __future__ import annotations

import json
import struct
from typing import Any, ClassVar, TypeVar

from yota.ir.errors import YotaError

A = TypeVar("A", bound="Artifact")


class Artifact:
    """Object code plus the JSON description a backend needs to run it in another process.
    (A plain class, compared by type and fields: creating a dataclass cost every new
    process ~0.4 ms on its first cache hit.)"""

    MAGIC: ClassVar[bytes] = b"YOTAART1"
    KIND: ClassVar[str] = "Yota"

    def __init__(self, object_code: bytes, meta: dict[str, Any]) -> None:
        self.object_code, self.meta = object_code, meta

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (self.object_code, self.meta) == (
            other.object_code, other.meta)

    __hash__ = None  # type: ignore[assignment]  # (mutable, as the dataclass was)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(object_code=<{len(self.object_code)} bytes>, "
                f"meta={self.meta!r})")

    def to_bytes(self) -> bytes:
        head = json.dumps(self.meta, sort_keys=True).encode()
        return self.MAGIC + struct.pack("<Q", len(head)) + head + self.object_code

    @classmethod
    def from_bytes(cls: type[A], data: bytes) -> A:
        if data[:8] != cls.MAGIC:
            raise YotaError(f"not a {cls.KIND} artifact (bad magic)")
        (n,) = struct.unpack("<Q", data[8:16])
        meta = json.loads(data[16:16 + n].decode())
        return cls(bytes(data[16 + n:]), meta)
