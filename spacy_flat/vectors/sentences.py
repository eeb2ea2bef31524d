"""Raw documents to clean sentences, and the filter that drops duplicates and
held-back sentences (the benchmarks' dev and test text) before any training."""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata
from collections import Counter
from typing import Iterable, Iterator, List, Optional, Set

# Tags that end a block of text become line breaks; every other tag goes.
_BLOCK_TAG = re.compile(r"</?(?:p|br|div|li|tr|h[1-6]|section|article)\b[^>]*>", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]{0,400}>")
_SPACES = re.compile(r"[^\S\n]+")
# A sentence ends after these (and any closing quotes or brackets that follow), or at a line break.
_SENTENCE = re.compile(r"[^。！？!?；;\n]*(?:[。！？!?；;]+[”’」』）)\]]*|\n|$)")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def clean(text: str) -> str:
    """Markup out, HTML entities decoded, NFKC (full-width Latin and digits to
    ASCII, as the character vocabulary folds them), runs of spaces to one.

    text (str): A raw document.
    RETURNS (str): The cleaned document; line breaks kept.
    """
    text = _BLOCK_TAG.sub("\n", text)
    text = _TAG.sub("", text)
    text = unicodedata.normalize("NFKC", html.unescape(text))
    return "\n".join(_SPACES.sub(" ", line).strip() for line in text.splitlines())


def split_sentences(text: str, min_han: int = 2) -> Iterator[str]:
    """The sentences of a clean document, each with at least `min_han` Han characters.

    text (str): A document after `clean`.
    min_han (int): Shorter sentences (headers, numbers, stray markup) are left out.
    YIELDS (str): The sentences, stripped.
    """
    for match in _SENTENCE.finditer(text):
        sentence = match.group(0).strip()
        if sentence and len(_HAN.findall(sentence)) >= min_han:
            yield sentence


def sentence_key(sentence: str) -> bytes:
    """RETURNS (bytes): An 8-byte digest; a set of these stands for the sentences
    seen in bounded memory (tens of millions fit), with a collision chance of
    about n² / 2⁶⁵."""
    return hashlib.blake2b(sentence.encode("utf8"), digest_size=8).digest()


class SentenceFilter:
    """Keeps each sentence once, and never one of the held-back texts.

    held_back (Iterable[str]): Documents no table may learn from (dev and test
        sets); they are cleaned and split the same way, so a test sentence
        planted in a corpus is recognised.
    """

    def __init__(self, held_back: Iterable[str] = ()) -> None:
        self.held_back: Set[bytes] = {sentence_key(s) for text in held_back for s in split_sentences(clean(text), 1)}
        self.seen: Set[bytes] = set()
        self.dropped: Counter = Counter()
        self.kept = 0

    def keep(self, sentence: str) -> Optional[str]:
        """RETURNS (Optional[str]): None to keep `sentence`, else why it is dropped."""
        key = sentence_key(sentence)
        if key in self.held_back:
            reason: Optional[str] = "held back (in a dev or test set)"
        elif key in self.seen:
            reason = "duplicate"
        else:
            self.seen.add(key)
            self.kept += 1
            return None
        self.dropped[reason] += 1
        return reason

    def sentences(self, documents: Iterable[str], min_han: int = 2) -> Iterator[str]:
        """YIELDS (str): The kept sentences of `documents`, in order."""
        for document in documents:
            for sentence in split_sentences(clean(document), min_han):
                if self.keep(sentence) is None:
                    yield sentence


def held_back_texts(paths: Iterable[str]) -> List[str]:
    """The texts of held-back files: DocBins (`.spacy`) or any format `sources` reads.

    paths (Iterable[str]): The files.
    RETURNS (List[str]): Their documents' texts.
    """
    from pathlib import Path

    from .sources import SourceReport, TextFields, read_texts

    texts: List[str] = []
    for name in paths:
        path = Path(name)
        if path.suffix == ".spacy":
            from spacy.tokens import DocBin
            from spacy.vocab import Vocab

            texts.extend(doc.text for doc in DocBin().from_disk(path).get_docs(Vocab()))
        else:
            texts.extend(text for text, _ in read_texts([path], TextFields(), SourceReport()))
    return texts
