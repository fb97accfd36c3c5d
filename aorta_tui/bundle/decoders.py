"""The encodings a file is opened through before it is scanned, and written back through.

A secret hides from a text scanner in UTF-16 (a Windows tool's log, PowerShell's stdout), in a
numpy string array (UTF-32, padded with NULs), in a zlib stream, in a gzip/bz2/xz file, in a
zip (perhaps after a prefix: a self-extracting script, a torch checkpoint), or in base64.
Each layer here turns bytes into the bytes underneath (UTF-8 for text) and back; the bundle
scans the inner bytes and writes the outer form again only when something was hidden. What
cannot be opened is :class:`Unscannable`: left out and listed, never copied.
"""

from __future__ import annotations

import ast
import io
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aorta_tui.core.numerals import ascii_digits

MiB = 1024 * 1024
# The most a compressed file may expand to while it is scanned (a bomb is left out), and how
# deep layers may nest (a .gz of a .gz ...).
MAX_INFLATED_BYTES = 256 * MiB
MAX_NESTING = 4
# Formats whose contents a bundle cannot scan: left out, never copied whole.
UNSCANNABLE_MAGIC = (
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"), (b"\x28\xb5\x2f\xfd", "zstd data"),
    (b"\x04\x22\x4d\x18", "lz4 data"), (b"Rar!\x1a\x07", "a rar archive"),
)
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_NPY_MAGIC = b"\x93NUMPY"


class Unscannable(Exception):
    """A file whose contents cannot be scanned: it is left out of the bundle and listed."""


@dataclass
class Layer:
    """One encoding opened: the bytes underneath, and how to write changed ones back."""

    kind: str
    inner: bytes
    rewrap: Callable[[bytes], bytes]


def open_layer(data: bytes, depth: int) -> Layer | None:
    """The layer ``data`` is wrapped in (None: plain bytes, scanned as they are)."""
    for magic, what in UNSCANNABLE_MAGIC:
        if data.startswith(magic):
            raise Unscannable(f"{what}: its contents cannot be scanned, so it is left out")
    if len(data) > 262 and data[257:262] == b"ustar":
        raise Unscannable("a tar archive: its members are not scanned, so it is left out")
    opener = _compressed(data) or _text_codec(data) or _npy(data) or _zlib(data)
    if opener is None:
        return None
    if depth >= MAX_NESTING:
        raise Unscannable(f"encoded {MAX_NESTING} times over: not scanned, left out")
    return opener()


# -- gzip, bz2, xz, zlib -------------------------------------------------------------------
def _compressed(data: bytes) -> Callable[[], Layer] | None:
    if data.startswith(b"\x1f\x8b"):
        kind = "gzip"
    elif data.startswith(b"BZh") and data[4:10] == b"\x31\x41\x59\x26\x53\x59":
        kind = "bz2"
    elif data.startswith(b"\xfd7zXZ\x00"):
        kind = "xz"
    else:
        return None
    return lambda: Layer(kind, inflate(kind, data), lambda b: deflate(kind, b))


class _Decompressor(Protocol):
    """What inflate uses of zlib's, bz2's and lzma's decompressor objects."""

    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


def _decompressor(kind: str) -> _Decompressor:
    import bz2
    import lzma

    makers: dict[str, Callable[[], _Decompressor]] = {
        "gzip": lambda: zlib.decompressobj(31), "zlib": zlib.decompressobj,
        "bz2": bz2.BZ2Decompressor, "xz": lzma.LZMADecompressor}
    return makers[kind]()


def inflate(kind: str, data: bytes) -> bytes:
    """Every member of a (multi-member) stream, at most :data:`MAX_INFLATED_BYTES`; a stream
    too large, cut short or damaged is :class:`Unscannable`."""
    import lzma

    out: list[bytes] = []
    size = 0
    rest = data
    try:
        while rest:
            d = _decompressor(kind)
            chunk = d.decompress(rest, MAX_INFLATED_BYTES - size + 1)
            size += len(chunk)
            out.append(chunk)
            if size > MAX_INFLATED_BYTES:
                raise Unscannable(f"{kind} data that expands to more than {MAX_INFLATED_BYTES} "
                                  "bytes: not scanned, left out")
            if not d.eof:
                raise Unscannable(f"{kind} data that is cut short: not scanned, left out")
            rest = d.unused_data.lstrip(b"\x00")  # gzip members may be padded
            if kind == "zlib" and rest:
                raise Unscannable("zlib data followed by other bytes: not scanned, left out")
    except (zlib.error, OSError, EOFError, lzma.LZMAError) as exc:
        raise Unscannable(f"{kind} data that cannot be read ({exc}): not scanned, left out") from None
    return b"".join(out)


def deflate(kind: str, data: bytes) -> bytes:
    import bz2
    import gzip
    import lzma

    if kind == "gzip":
        return gzip.compress(data, mtime=0)
    if kind == "zlib":
        return zlib.compress(data)
    return bz2.compress(data) if kind == "bz2" else lzma.compress(data)


def _zlib(data: bytes) -> Callable[[], Layer] | None:
    """A raw zlib stream (``zlib.compress``'s output): its header's check bits, and a first
    block that inflates (text starting ``x^`` is no stream)."""
    if len(data) < 8 or data[0] != 0x78 or (data[0] * 256 + data[1]) % 31:
        return None
    try:
        zlib.decompressobj().decompress(data[:64], 1)
    except zlib.error:
        return None
    return lambda: Layer("zlib", inflate("zlib", data), lambda b: deflate("zlib", b))


# -- text in UTF-16 / UTF-32 ---------------------------------------------------------------
def _text_codec(data: bytes) -> Callable[[], Layer] | None:
    codec, bom = _detect_codec(data)
    if codec is None:
        return None

    def opened() -> Layer:
        try:
            text = data[len(bom):].decode(codec)
        except UnicodeDecodeError as exc:
            raise Unscannable(f"{codec} text that cannot be decoded (byte {exc.start}): not "
                              "scanned, left out") from None
        return Layer(codec, text.encode("utf-8", "surrogatepass"),
                     lambda b: bom + b.decode("utf-8", "surrogatepass").encode(codec))
    return opened


def _detect_codec(data: bytes) -> tuple[str | None, bytes]:
    marked = [(codec, bom) for bom, codec in _BOMS if data.startswith(bom)]
    for codec, bom in marked:  # FF FE 00 00 is UTF-32's mark, or UTF-16's before a NUL
        if len(marked) == 1 or _decodes(data[len(bom):], codec):
            return codec, bom
    if len(data) < 16 or len(data) % 2:
        return None, b""
    sample = data[:4096]
    for codec, width in (("utf-32-le", 4), ("utf-32-be", 4), ("utf-16-le", 2), ("utf-16-be", 2)):
        if len(data) % width == 0 and _looks_like(sample[: len(sample) // width * width], codec):
            return codec, b""
    return None, b""


def _decodes(data: bytes, codec: str) -> bool:
    try:
        data.decode(codec)
    except UnicodeDecodeError:
        return False
    return True


def _looks_like(sample: bytes, codec: str) -> bool:
    """Text without a BOM: it decodes, and nearly all of it is printable (ASCII as UTF-16
    has a NUL beside every letter, which UTF-8 text never has)."""
    if sample.count(0) < len(sample) // 3:
        return False
    try:
        text = sample.decode(codec)
    except UnicodeDecodeError:
        return False
    good = sum(1 for ch in text if ch.isprintable() or ch in "\n\r\t")
    return bool(text) and good >= 0.97 * len(text) and "\x00" not in text


# -- numpy string arrays -------------------------------------------------------------------
def _npy(data: bytes) -> Callable[[], Layer] | None:
    if not data.startswith(_NPY_MAGIC) or len(data) < 10:
        return None
    return lambda: _npy_layer(data)


def _npy_header(data: bytes) -> tuple[dict[str, Any], int]:
    major = data[6]
    size_bytes = 2 if major == 1 else 4
    start = 8 + size_bytes
    length = int.from_bytes(data[8:start], "little")
    try:
        header = ast.literal_eval(data[start:start + length].decode("latin-1"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("descr"), str):
        raise Unscannable("a numpy file whose header cannot be read: not scanned, left out")
    return header, start + length


def _npy_layer(data: bytes) -> Layer:
    """A unicode array's elements, one per line (UTF-8); written back as a unicode array of
    the same shape, as wide as its longest element. Other dtypes are scanned as bytes (a
    numeric array has no text; a bytes array is ASCII already)."""
    header, body_at = _npy_header(data)
    descr = header["descr"]
    if len(descr) < 3 or descr[1] != "U" or not ascii_digits(descr[2:]):
        return Layer("npy", data, lambda b: b)  # not text: its bytes are scanned as they are
    width, order = int(descr[2:]), descr[0]
    codec = "utf-32-be" if order == ">" else "utf-32-le"
    body = data[body_at:]
    step = width * 4
    if step == 0 or len(body) % step:
        raise Unscannable("a numpy string array cut short: not scanned, left out")
    try:
        items = [body[i:i + step].decode(codec).rstrip("\x00") for i in range(0, len(body), step)]
    except UnicodeDecodeError:
        raise Unscannable("a numpy string array that is not UTF-32: not scanned, left out") from None
    if any("\n" in s for s in items):
        raise Unscannable("a numpy string array with line breaks in it: not scanned, left out")

    def rewrap(inner: bytes) -> bytes:
        new = inner.decode("utf-8", "surrogatepass").split("\n")
        if len(new) != len(items):
            raise Unscannable("a numpy string array that could not be written back: left out")
        return _npy_bytes(header, new, codec)
    return Layer("npy", "\n".join(items).encode("utf-8", "surrogatepass"), rewrap)


def _npy_bytes(header: dict[str, Any], items: list[str], codec: str) -> bytes:
    width = max([1, *(len(s) for s in items)])
    descr = (">" if codec.endswith("be") else "<") + f"U{width}"
    text = repr({"descr": descr, "fortran_order": bool(header.get("fortran_order")),
                 "shape": tuple(header.get("shape", (len(items),)))})
    pad = -(10 + len(text) + 1) % 64
    head = (text + " " * pad + "\n").encode("latin-1")
    body = b"".join(s.ljust(width, "\x00").encode(codec) for s in items)
    return _NPY_MAGIC + b"\x01\x00" + len(head).to_bytes(2, "little") + head + body


# -- zip -----------------------------------------------------------------------------------
def zip_members(data: bytes) -> tuple[bytes, list[tuple[Any, bytes]]] | None:
    """(the bytes before the archive, [(member info, its bytes)]) of a zip, a prefixed one
    included; None when ``data`` holds no zip. Encrypted or oversized members are
    :class:`Unscannable`."""
    import zipfile

    if b"PK\x05\x06" not in data[-(66 * 1024):] and not data.startswith(b"PK\x03\x04"):
        return None
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
        prefix_end = min((i.header_offset for i in infos), default=0)
        total = 0
        members: list[tuple[Any, bytes]] = []
        for info in infos:
            if info.flag_bits & 0x1:
                raise Unscannable("a zip with an encrypted member: not scanned, left out")
            total += info.file_size
            if total > MAX_INFLATED_BYTES:
                raise Unscannable(f"a zip whose members hold more than {MAX_INFLATED_BYTES} "
                                  "bytes: not scanned, left out")
            members.append((info, zf.read(info)))
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError,
            ValueError) as exc:
        if data.startswith(b"PK\x03\x04"):
            raise Unscannable(f"a zip that cannot be read ({exc}): not scanned, left out") from None
        return None  # "PK\5\6" inside other bytes, no archive: scanned as bytes
    return data[:prefix_end], members


def zip_bytes(prefix: bytes, members: list[tuple[Any, str, bytes]]) -> bytes:
    """A new zip of ``(info, name, data)`` after ``prefix`` (readers find a prefixed zip by
    its end record)."""
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for info, name, body in members:
            new = zipfile.ZipInfo(name, date_time=info.date_time)
            new.compress_type = info.compress_type if info.compress_type in (
                zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) else zipfile.ZIP_DEFLATED
            new.external_attr = info.external_attr
            zf.writestr(new, body)
    return prefix + buf.getvalue()
