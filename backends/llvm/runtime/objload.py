"""Yota's own loader of the object code the llvm backend emits: no LLVM needed to run it.

Importing llvmlite's binding (about 25-40 ms: the LLVM shared library and its ctypes
prototypes) and setting up an MCJIT engine would be most of a cache hit's cost in a new
process, yet loading an object file needs none of LLVM. The objects this backend emits
are ELF relocatable files for x86-64 built with the JIT's (large) code model: their
code reaches every other section and every external symbol through 64-bit absolute
addresses (``R_X86_64_64``), so loading one is: map its sections, resolve its symbols
by name (the names ``bind`` recorded: BLAS/LAPACK, the helper pool; then libmvec and
the process, as MCJIT resolves them), apply the relocations, and make the code
executable (``mprotect``; memory is never writable and executable at once).

``load`` returns None for anything it does not handle exactly (another platform or
machine, a relocation or section type outside the small set below, a symbol it cannot
resolve, a value that does not fit its field): the caller then loads through MCJIT, as
before. ``YOTA_OWN_LOADER=0`` makes it always decline. Unwind tables (``.eh_frame``)
are not registered: generated code never unwinds (no exceptions, helpers never exit).
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
from collections.abc import Callable

# symbols bound by name for generated code (BLAS/LAPACK, the helper pool): name -> address
SYMBOLS: dict[str, int] = {}
_lock = threading.Lock()

SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_TLS = 0x1, 0x2, 0x4, 0x400
SHT_PROGBITS, SHT_SYMTAB, SHT_RELA, SHT_NOBITS = 1, 2, 4, 8
SHT_X86_64_UNWIND = 0x70000001
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
STT_SECTION = 3
# relocation type -> (size in bytes, PC-relative, signed)
RELOCS: dict[int, tuple[int, bool, bool]] = {
    1: (8, False, False),  # R_X86_64_64: S + A
    2: (4, True, True),  # R_X86_64_PC32: S + A - P
    4: (4, True, True),  # R_X86_64_PLT32 (no PLT: the target must be within 2 GiB)
    10: (4, False, False),  # R_X86_64_32
    11: (4, False, True),  # R_X86_64_32S
    24: (8, True, True),  # R_X86_64_PC64
}
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_PRIVATE, MAP_ANONYMOUS = 0x02, 0x20  # Linux
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_LIBC.mprotect.restype = ctypes.c_int
_LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_LIBC.mmap.restype = ctypes.c_void_p
_LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_LIBC.munmap.restype = ctypes.c_int
_PAGE = os.sysconf("SC_PAGE_SIZE")


def usable() -> bool:
    """Whether this loader can run objects here (x86-64 Linux, not turned off)."""
    return sys.platform == "linux" and os.uname().machine in ("x86_64", "amd64") \
        and os.environ.get("YOTA_OWN_LOADER", "1") != "0"


def bind(name: str, addr: int) -> None:
    """Record the address generated code reaches by ``name``."""
    with _lock:
        SYMBOLS[name] = addr


def process_symbol(name: str) -> int | None:
    """The address of ``name`` among the process's global symbols (libc, libm...)."""
    try:
        return ctypes.cast(_LIBC[name], ctypes.c_void_p).value
    except AttributeError:
        return None


class Image:
    """Loaded code: a private anonymous mapping of ``size`` bytes at ``base`` (unmapped
    when this object is collected) and the addresses of the symbols asked for."""

    def __init__(self, base: int, size: int) -> None:
        self.base, self.size = base, size
        self.addresses: dict[str, int] = {}

    def __del__(self) -> None:
        if self.base:
            _LIBC.munmap(self.base, self.size)
            self.base = 0


class _Decline(Exception):
    """The object holds something this loader does not handle: MCJIT loads it."""


def load(obj: bytes, symbols: list[str], resolve: Callable[[str], int | None]
         ) -> Image | None:
    """Load ``obj`` and return it with the addresses of ``symbols`` (global symbols it
    defines), external names resolved by ``resolve``; None when this loader declines."""
    if not usable():
        return None
    try:
        return _load(memoryview(obj), symbols, resolve)
    except (_Decline, struct.error, IndexError, ValueError, OverflowError):
        return None


def _sections(obj: memoryview) -> list[tuple[int, ...]]:
    if bytes(obj[:4]) != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise _Decline("not a little-endian ELF64 file")
    e_type, e_machine = struct.unpack_from("<HH", obj, 16)
    if e_type != 1 or e_machine != 62:  # ET_REL, EM_X86_64
        raise _Decline("not an x86-64 relocatable object")
    shoff, = struct.unpack_from("<Q", obj, 40)
    shentsize, shnum = struct.unpack_from("<HH", obj, 58)
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
    return [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize)
            for i in range(shnum)]


def _layout(secs: list[tuple[int, ...]]) -> tuple[dict[int, int], list[tuple[int, int, int]]]:
    """Offsets of the sections to load within the mapping, grouped by protection (code,
    read-only data, writable data), each group starting on a page: the offsets and the
    groups as (start, end, protection)."""
    groups: list[list[int]] = [[], [], []]
    for i, s in enumerate(secs):
        typ, flags = s[1], s[2]
        if not flags & SHF_ALLOC or typ == SHT_X86_64_UNWIND or s[5] == 0:
            continue
        if typ not in (SHT_PROGBITS, SHT_NOBITS) or flags & SHF_TLS:
            raise _Decline(f"section type {typ:#x}")
        groups[0 if flags & SHF_EXECINSTR else 2 if flags & SHF_WRITE else 1].append(i)
    prots = (PROT_READ | PROT_EXEC, PROT_READ, PROT_READ | PROT_WRITE)
    offsets: dict[int, int] = {}
    spans = []
    pos = 0
    for group, prot in zip(groups, prots, strict=True):
        start = pos
        for i in group:
            align = max(1, secs[i][8])
            if align > _PAGE:  # the mapping is only page-aligned
                raise _Decline(f"section alignment {align}")
            pos = (pos + align - 1) // align * align
            offsets[i] = pos
            pos += secs[i][5]
        pos = (pos + _PAGE - 1) // _PAGE * _PAGE
        if pos > start:
            spans.append((start, pos, prot))
    return offsets, spans


def _load(obj: memoryview, symbols: list[str], resolve: Callable[[str], int | None]
          ) -> Image:
    secs = _sections(obj)
    offsets, spans = _layout(secs)
    size = max((end for _, end, _ in spans), default=_PAGE)
    base = _LIBC.mmap(None, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    if base is None or base == ctypes.c_void_p(-1).value:
        raise _Decline(f"mmap failed: {os.strerror(ctypes.get_errno())}")
    mapped = Image(base, size)  # unmapped again if anything below declines
    image = bytearray(size)
    for i, off in offsets.items():
        s = secs[i]
        if s[1] == SHT_PROGBITS:
            image[off:off + s[5]] = obj[s[4]:s[4] + s[5]]
    strtab_of = {i: secs[s[6]] for i, s in enumerate(secs) if s[1] == SHT_SYMTAB}
    if len(strtab_of) != 1:
        raise _Decline("not one symbol table")
    (symidx, strsec), = strtab_of.items()
    addrs, names = _symbols(obj, secs[symidx], strsec, offsets, base, resolve)
    for s in secs:
        if s[1] == SHT_RELA and s[7] in offsets:
            _relocate(obj, s, image, offsets[s[7]], base, addrs)
        elif s[1] == 9:  # SHT_REL: not emitted for x86-64
            raise _Decline("REL relocations")
    ctypes.memmove(base, bytes(image), size)
    for start, end, prot in spans:
        if _LIBC.mprotect(base + start, end - start, prot) != 0:  # e.g. no exec mappings
            raise _Decline(f"mprotect failed: {os.strerror(ctypes.get_errno())}")
    missing = [n for n in symbols if n not in names]
    if missing:
        raise _Decline(f"symbols {missing} not defined")
    mapped.addresses = {n: names[n] for n in symbols}
    return mapped


def _cstr(obj: memoryview, strsec: tuple[int, ...], off: int) -> str:
    start = strsec[4] + off
    end = bytes(obj[start:start + 4096]).index(b"\0")  # ValueError: declined
    return bytes(obj[start:start + end]).decode()


def _symbols(obj: memoryview, symtab: tuple[int, ...], strsec: tuple[int, ...],
             offsets: dict[int, int], base: int, resolve: Callable[[str], int | None]
             ) -> tuple[list[int], dict[str, int]]:
    """Every symbol's address (by index), and the defined global ones by name."""
    addrs: list[int] = []
    defined: dict[str, int] = {}
    for k in range(symtab[5] // 24):
        name_off, info, _other, shndx, value, _size = struct.unpack_from(
            "<IBBHQQ", obj, symtab[4] + k * 24)
        name = _cstr(obj, strsec, name_off) if name_off else ""
        if shndx == SHN_UNDEF:
            addr = resolve(name) if name else 0
            if addr is None or (name and not addr):
                raise _Decline(f"unresolved symbol {name}")
        elif shndx == SHN_ABS:
            addr = value
        elif shndx == SHN_COMMON or shndx >= 0xFF00:
            raise _Decline("common or special symbols")
        elif shndx in offsets:
            addr = base + offsets[shndx] + value
        else:
            addr = 0  # a symbol in a section not loaded (.eh_frame): never relocated into
        addrs.append(addr)
        if name and info >> 4 and shndx != SHN_UNDEF and info & 0xF != STT_SECTION:
            defined[name] = addr
    return addrs, defined


def _relocate(obj: memoryview, rela: tuple[int, ...], image: bytearray, sec_off: int,
              base: int, addrs: list[int]) -> None:
    for k in range(rela[5] // 24):
        r_offset, r_info, addend = struct.unpack_from("<QQq", obj, rela[4] + k * 24)
        kind = RELOCS.get(r_info & 0xFFFFFFFF)
        if kind is None:
            raise _Decline(f"relocation type {r_info & 0xFFFFFFFF}")
        nbytes, pcrel, signed = kind
        sym = addrs[r_info >> 32]
        if not sym and r_info >> 32:
            raise _Decline("relocation against a section not loaded")
        at = sec_off + r_offset
        value = sym + addend - (base + at if pcrel else 0)
        if not signed:
            value &= (1 << 64) - 1
        fmt = {(8, False): "<Q", (8, True): "<q", (4, False): "<I", (4, True): "<i"}[
            nbytes, signed]
        struct.pack_into(fmt, image, at, value)  # struct.error when it does not fit
