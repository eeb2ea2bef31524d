"""Each training text's lattice and feature ids, computed once per run and read every epoch.

Every epoch of training featurizes the same texts again: the lattice match, the character rows,
the bigrams' hashes and rows (`features.text_ids`). A `FeatureCache` keeps those ids per text,
never the float vectors they index (which training may change, and which would take far more
memory), under a key that names everything that shapes them: the lexicon, the character table and
the bigram table (digests of their bytes), the settings (`max_words`, `bigram_rows`,
`bigram_vectors`) and the version of the code that computes them. Windows need no part of the key:
a window is its own text.

Memory is bounded: beyond `memory_bytes` the oldest half of the entries is written to a shard
under `spill_dir/KEY/` (a folder of .npy files written under a temporary name and renamed, so a
reader never sees half of one, and seeds training in one output folder can share it) and read back
from there memory-mapped, so a shuffled epoch's reads cost the pages they touch. A later run
with the same key reads the shards already there; the folders of other keys are removed once no
live process uses them (each user leaves its process id under `users/` while it runs).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import uuid
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy

from ..about import __version__
from .char_vocab import CharVocab
from .features import TextIds
from .lexicon import Lexicon

# Bump when `features.text_ids` changes what it computes: old shards then fail the key.
CODE_VERSION = 1
# Entries kept in memory before the oldest half is spilled to disk.
MEMORY_BYTES = 512 * 2**20
ARRAYS = ("word_heads", "word_tails", "word_rows", "char_rows", "bigram_hashes", "bigram_rows")


def cache_key(
    lexicon: Lexicon, char_vocab: CharVocab, bigram_table: Optional[Lexicon], settings: Dict[str, object]
) -> str:
    """RETURNS (str): A digest of everything that shapes a text's ids: the lexicons' words (not
    their vectors, which ids only index), the character table's entries, the settings, and the
    versions of the package and of this cache's layout."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{__version__} v{CODE_VERSION} {sorted(settings.items())}".encode())
    for words in (lexicon.words, char_vocab.entries, bigram_table.words if bigram_table is not None else None):
        digest.update(b"-" if words is None else hashlib.blake2b("\n".join(words).encode("utf8")).digest())
    return digest.hexdigest()


def split(ids: TextIds) -> List[TextIds]:
    """RETURNS (List[TextIds]): One `TextIds` per text of `ids`."""
    chars = numpy.concatenate([[0], numpy.cumsum(ids.lengths)])
    words = numpy.concatenate([[0], numpy.cumsum(ids.counts)])
    out = []
    for k in range(len(ids.lengths)):
        c, w = slice(chars[k], chars[k + 1]), slice(words[k], words[k + 1])
        out.append(
            TextIds(
                ids.lengths[k : k + 1],
                ids.counts[k : k + 1],
                ids.word_heads[w],
                ids.word_tails[w],
                ids.word_rows[w],
                ids.char_rows[c],
                None if ids.bigram_hashes is None else ids.bigram_hashes[c],
                None if ids.bigram_rows is None else ids.bigram_rows[c],
            )
        )
    return out


def join(parts: Sequence[TextIds]) -> TextIds:
    """RETURNS (TextIds): The texts of `parts`, in order, as one `TextIds`."""

    def cat(name: str) -> Optional[numpy.ndarray]:
        arrays = [getattr(part, name) for part in parts]
        return None if arrays[0] is None else numpy.concatenate(arrays)

    lengths, counts = cat("lengths"), cat("counts")
    assert lengths is not None and counts is not None
    found = {name: cat(name) for name in ARRAYS}
    return TextIds(lengths, counts, **found)  # type: ignore[arg-type]


def _size(ids: TextIds) -> int:
    return sum(getattr(ids, name).nbytes for name in ("lengths", "counts", *ARRAYS) if getattr(ids, name) is not None)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf8"), digest_size=16).digest()


class FeatureCache:
    """Texts' ids (`TextIds`) by text, in memory up to a bound and in shard files beyond it.

    key (str): `cache_key` of the resources and settings the ids were computed with.
    memory_bytes (int): The bound on the entries kept in memory.
    spill_dir (Optional[Path]): Where shards go (a folder per key); None: a temporary folder,
        removed when the process ends.
    """

    def __init__(self, key: str, *, memory_bytes: int = MEMORY_BYTES, spill_dir: Optional[Path] = None) -> None:
        self.key = key
        self.memory_bytes = memory_bytes
        self._memory: OrderedDict[str, TextIds] = OrderedDict()
        self._bytes = 0
        # Spilled entries: the text's digest -> (shard file, index in it).
        self._spilled: Dict[bytes, Tuple[Path, int]] = {}
        self._shards: OrderedDict[Path, Dict[str, numpy.ndarray]] = OrderedDict()
        self.hits = self.misses = 0
        self.folder: Optional[Path] = None
        if spill_dir is not None:
            self.folder = Path(spill_dir) / key
            self._open(Path(spill_dir))

    def __len__(self) -> int:
        return len(self._memory) + len(self._spilled)

    @property
    def memory_used(self) -> int:
        """RETURNS (int): Bytes of the ids held in memory."""
        return self._bytes

    def ids(self, texts: Sequence[str], compute: Callable[[Sequence[str]], TextIds]) -> TextIds:
        """The ids of `texts`: those kept read back, the others computed (in one call) and kept.

        compute (Callable[[Sequence[str]], TextIds]): `features.text_ids` for some texts.
        """
        found: List[Optional[TextIds]] = [self._get(text) for text in texts]
        missing = [k for k, entry in enumerate(found) if entry is None]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = split(compute([texts[k] for k in missing]))
            for k, entry in zip(missing, fresh):
                found[k] = entry
                self._put(texts[k], entry)
        return join([entry for entry in found if entry is not None])

    def _get(self, text: str) -> Optional[TextIds]:
        entry = self._memory.get(text)
        if entry is not None or not self._spilled:
            return entry
        where = self._spilled.get(_digest(text))
        return None if where is None else self._read(*where)

    def _put(self, text: str, entry: TextIds) -> None:
        if text in self._memory:
            return
        self._memory[text] = entry
        self._bytes += _size(entry)
        if self._bytes > self.memory_bytes:
            self._spill(len(self._memory) // 2 or 1)

    def _spill(self, n: int) -> None:
        """Write the `n` oldest entries in memory to a shard, atomically, and drop them from memory."""
        texts = list(self._memory)[:n]
        entries = [self._memory.pop(text) for text in texts]
        self._bytes -= sum(_size(entry) for entry in entries)
        joined = join(entries)
        arrays = {name: getattr(joined, name) for name in ("lengths", "counts", *ARRAYS)}
        arrays = {name: value for name, value in arrays.items() if value is not None}
        digests = [_digest(text) for text in texts]
        arrays["digests"] = numpy.frombuffer(b"".join(digests), dtype="uint8").reshape(len(texts), 16)
        folder = self._folder()
        # A shard is a folder of .npy files, made under a temporary name and renamed whole: a reader
        # never sees half of one. Read back memory-mapped, a shard costs the pages read, not its size.
        partial = folder / f".partial-{uuid.uuid4().hex}"
        partial.mkdir()
        for name, value in arrays.items():
            numpy.save(partial / f"{name}.npy", value)
        path = folder / f"shard-{uuid.uuid4().hex}"
        os.replace(partial, path)
        for k, digest in enumerate(digests):
            self._spilled[digest] = (path, k)

    def _read(self, path: Path, index: int) -> TextIds:
        shard = self._shards.get(path)
        if shard is None:
            shard = {item.stem: numpy.load(item, mmap_mode="r") for item in path.glob("*.npy")}
            shard["char_starts"] = numpy.concatenate([[0], numpy.cumsum(shard["lengths"])])
            shard["word_starts"] = numpy.concatenate([[0], numpy.cumsum(shard["counts"])])
            self._shards[path] = shard
        c = slice(shard["char_starts"][index], shard["char_starts"][index + 1])
        w = slice(shard["word_starts"][index], shard["word_starts"][index + 1])
        by_chars = {"char_rows", "bigram_hashes", "bigram_rows"}
        found = {
            name: numpy.array(shard[name][c if name in by_chars else w]) if name in shard else None for name in ARRAYS
        }
        return TextIds(
            numpy.array(shard["lengths"][index : index + 1]),
            numpy.array(shard["counts"][index : index + 1]),
            **found,  # type: ignore[arg-type]
        )

    def _folder(self) -> Path:
        """This key's folder, made when first needed (a temporary one without a `spill_dir`)."""
        if self.folder is None:
            root = Path(tempfile.mkdtemp(prefix="flat-features-"))
            weakref.finalize(self, shutil.rmtree, root, True)
            self.folder = root / self.key
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder

    def _open(self, root: Path) -> None:
        """Read the index of this key's shards, mark this process as a user, remove other keys'
        folders that no live process uses."""
        assert self.folder is not None
        users = self.folder / "users"
        users.mkdir(parents=True, exist_ok=True)
        mine = users / str(os.getpid())
        mine.touch()
        weakref.finalize(self, mine.unlink, missing_ok=True)
        for shard in sorted(self.folder.glob("shard-*")):
            try:
                digests = numpy.load(shard / "digests.npy")
            except (OSError, ValueError):
                continue  # damaged: never read
            for k, digest in enumerate(digests):
                self._spilled.setdefault(digest.tobytes(), (shard, k))
        for other in root.iterdir():
            # Only folders this class made: a key's name, with its users.
            ours = len(other.name) == len(self.key) and (other / "users").is_dir()
            if ours and other != self.folder and not _in_use(other):
                shutil.rmtree(other, ignore_errors=True)


def _in_use(folder: Path) -> bool:
    """RETURNS (bool): Whether a live process left its id under `folder/users` (on Windows, where
    `os.kill` cannot ask, any user counts as live)."""
    for user in (folder / "users").glob("*"):
        if os.name == "nt":
            return True
        try:
            os.kill(int(user.name), 0)
            return True
        except (ValueError, ProcessLookupError):
            continue
        except OSError:  # no permission to signal it: it exists
            return True
    return False
