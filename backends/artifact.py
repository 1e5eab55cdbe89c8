"""The on-disk form of a compiled program, shared by the backends: an 8-byte magic naming
the backend's format, a JSON header (``meta``), then the machine code (``object_code``).

JSON only, never pickle: loading an artifact must not execute Python data.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from yota.ir.errors import YotaError

A = TypeVar("A", bound="Artifact")


@dataclass
class Artifact:
    """Object code plus the JSON description a backend needs to run it in another process."""

    MAGIC: ClassVar[bytes] = b"YOTAART1"
    KIND: ClassVar[str] = "Yota"

    object_code: bytes
    meta: dict[str, Any]

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
