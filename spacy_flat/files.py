"""Reading files that may be xz-, gzip- or bz2-compressed, by their suffix, and digests of files."""

import bz2
import gzip
import hashlib
import lzma
from pathlib import Path
from typing import IO, cast

COMPRESSED = (".xz", ".gz", ".bz2")


def decompressed(raw: IO[bytes], suffix: str) -> IO[bytes]:
    """A binary stream reading `raw` (a zip member, say) decompressed, for a suffix
    in `COMPRESSED`; closing it leaves `raw` open."""
    # The decompressors are binary file objects; typeshed does not call them IO[bytes].
    if suffix == ".xz":
        return cast(IO[bytes], lzma.LZMAFile(raw))
    if suffix == ".gz":
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw))
    if suffix == ".bz2":
        return cast(IO[bytes], bz2.BZ2File(raw))
    raise ValueError(f"not a compressed suffix: {suffix!r}")


def open_binary(path: Path) -> IO[bytes]:
    """`path` opened for binary reading, decompressed when its suffix says so."""
    # Opened by name, so that closing the stream closes the file.
    suffix = path.suffix.lower()
    if suffix == ".xz":
        return cast(IO[bytes], lzma.open(path, "rb"))
    if suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    if suffix == ".bz2":
        return cast(IO[bytes], bz2.open(path, "rb"))
    return path.open("rb")


def file_digest(path: Path, algorithm: str) -> str:
    """RETURNS (str): The hex digest of a file's content (`algorithm` as hashlib names it), read in 1 MB blocks."""
    digest = hashlib.new(algorithm)
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
