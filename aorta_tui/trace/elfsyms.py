"""Read the exported function symbols of an ELF shared library (no external tools needed).

Used to check that a uprobe target exists before bpftrace is asked to attach, to drop aliases
(two names at one address would fire twice per call), and to classify each function's first
instruction: x86-64 uprobes on a ``push`` are emulated (cheap), others are single-stepped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_STT_FUNC = 2
_STT_GNU_IFUNC = 10
_SHT_DYNSYM = 11
_SHT_SYMTAB = 2
_PT_LOAD = 1


class ElfError(ValueError):
    pass


@dataclass(frozen=True)
class FunctionSymbol:
    name: str
    address: int
    size: int
    first_bytes: bytes

    @property
    def prologue(self) -> str:
        """``push`` (emulated uprobe, ~0.5 us a hit) or ``other`` (single-stepped, slower)."""
        b = self.first_bytes
        if b[:1] and 0x50 <= b[0] <= 0x57:
            return "push"
        if b[:2] and b[0] == 0x41 and len(b) > 1 and 0x50 <= b[1] <= 0x57:
            return "push"
        return "other"


@lru_cache(maxsize=64)
def _read_functions(path: str, mtime_ns: int) -> dict[str, FunctionSymbol]:
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        raise ElfError(f"{path} is not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path} is not a 64-bit little-endian ELF file")
    (e_phoff, e_shoff) = struct.unpack_from("<QQ", data, 0x20)
    (e_phentsize, e_phnum, e_shentsize, e_shnum) = struct.unpack_from("<HHHH", data, 0x36)
    loads = []
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, e_phoff + i * e_phentsize
        )
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
    sections = []
    for i in range(e_shnum):
        sh = struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
        sections.append(sh)
    out: dict[str, FunctionSymbol] = {}
    for wanted in (_SHT_DYNSYM, _SHT_SYMTAB):
        for sh in sections:
            if sh[1] != wanted:
                continue
            _n, _t, _f, _a, off, size, link, _info, _align, entsize = sh
            stroff = sections[link][4]
            for j in range(size // (entsize or 24)):
                st_name, st_info, _other, st_shndx, st_value, st_size = struct.unpack_from(
                    "<IBBHQQ", data, off + j * (entsize or 24)
                )
                if st_shndx == 0 or st_value == 0 or (st_info & 0xF) not in (_STT_FUNC, _STT_GNU_IFUNC):
                    continue
                end = data.index(b"\0", stroff + st_name)
                name = data[stroff + st_name : end].decode("ascii", "replace")
                if name in out:
                    continue
                first = b""
                for vaddr, foff, filesz in loads:
                    if vaddr <= st_value < vaddr + filesz:
                        fo = foff + (st_value - vaddr)
                        first = data[fo : fo + 8]
                        break
                out[name] = FunctionSymbol(name, st_value, st_size, first)
        if out:
            break
    return out


def functions(path: str | Path) -> dict[str, FunctionSymbol]:
    """Exported (or, for stripped-less files, all) function symbols by name."""
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError as exc:
        raise ElfError(f"cannot read {p}: {exc.strerror}") from None
    try:
        return _read_functions(str(p), st.st_mtime_ns)
    except (struct.error, IndexError) as exc:
        raise ElfError(f"{p}: malformed ELF ({exc})") from None


def pick_unique(path: str | Path, names: list[str]) -> tuple[list[FunctionSymbol], list[str]]:
    """The symbols of ``names`` that exist, keeping the first name for each address.

    Returns (symbols, missing names). Aliases (same address) are dropped so a call is probed
    once.
    """
    table = functions(path)
    seen: set[int] = set()
    found: list[FunctionSymbol] = []
    missing: list[str] = []
    for n in names:
        sym = table.get(n)
        if sym is None:
            missing.append(n)
            continue
        if sym.address in seen:
            continue
        seen.add(sym.address)
        found.append(sym)
    return found, missing
