"""The training corpus of a student: the gold corpus and, beside it, silver
sentences in the ratio the config sets."""

from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, List, Optional

from spacy.language import Language
from spacy.training import Corpus, Example
from spacy.util import registry

from ..errors import FlatError
from ..pipeline.teaching import is_silver


@registry.readers("spacy-flat.gold_and_silver.v1")
def create_gold_and_silver(
    gold: Path,
    silver: Optional[Path] = None,
    silver_ratio: float = 1.0,
    max_length: int = 0,
    limit: int = 0,
) -> Callable[[Language], Iterable[Example]]:
    """The gold examples, then up to `silver_ratio` silver examples per gold one,
    taken in the silver file's order (which `silver` writes sure sentences in).

    gold (Path): The gold DocBin (or a directory of them), as spaCy's corpus reads it.
    silver (Optional[Path]): A DocBin written by `python -m spacy_flat silver`; None: gold only.
    silver_ratio (float): Silver examples per gold example; 0 for none.
    max_length (int): Longer docs are left out (spaCy's corpus setting); 0 for no limit.
    limit (int): Read at most this many gold docs; 0 for all.
    RETURNS (Callable[[Language], Iterable[Example]]): The reader.
    """
    if silver_ratio < 0:
        raise ValueError(f"silver_ratio must be 0 or more, got {silver_ratio}")
    gold_corpus = Corpus(gold, max_length=max_length, limit=limit)
    silver_corpus = None if silver is None else Corpus(silver, max_length=max_length)

    def read(nlp: Language) -> Iterable[Example]:
        gold_examples: List[Example] = list(gold_corpus(nlp))
        yield from gold_examples
        if silver_corpus is None or silver_ratio == 0:
            return
        wanted = round(silver_ratio * len(gold_examples))
        for k, eg in enumerate(islice(silver_corpus(nlp), wanted)):
            if not is_silver(eg.reference):
                raise FlatError(
                    f"{silver}: doc {k} is not marked silver; write the silver file with `python -m spacy_flat silver`"
                )
            yield eg

    return read
