"""The training corpus of a student: the gold corpus and, beside it, silver
sentences in the ratio the config sets."""

from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional

from spacy.language import Language
from spacy.training import Corpus, Example
from spacy.util import registry

from ..errors import FlatError
from ..pipeline.teaching import is_silver


class GoldAndSilver:
    """The gold examples, then up to `silver_ratio` silver examples per gold one,
    taken in the silver file's order (which `silver` writes sure sentences in).

    `paths` names the files read, so a resumed run can tell whether they changed.
    """

    def __init__(self, gold: Path, silver: Optional[Path], silver_ratio: float, max_length: int, limit: int) -> None:
        if silver_ratio < 0:
            raise ValueError(f"silver_ratio must be 0 or more, got {silver_ratio}")
        self.gold = Corpus(gold, max_length=max_length, limit=limit)
        self.silver = None if silver is None or silver_ratio == 0 else Corpus(silver, max_length=max_length)
        self.silver_path = silver
        self.silver_ratio = silver_ratio
        self.paths: List[Path] = [Path(gold)] + ([Path(silver)] if self.silver is not None and silver else [])

    def __call__(self, nlp: Language) -> Iterator[Example]:
        gold_examples: List[Example] = list(self.gold(nlp))
        yield from gold_examples
        if self.silver is None:
            return
        wanted = round(self.silver_ratio * len(gold_examples))
        for k, eg in enumerate(islice(self.silver(nlp), wanted)):
            if not is_silver(eg.reference):
                raise FlatError(
                    f"{self.silver_path}: doc {k} is not marked silver; write the silver file with "
                    "`python -m spacy_flat silver`"
                )
            yield eg


@registry.readers("spacy-flat.gold_and_silver.v1")
def create_gold_and_silver(
    gold: Path,
    silver: Optional[Path] = None,
    silver_ratio: float = 1.0,
    max_length: int = 0,
    limit: int = 0,
) -> Callable[[Language], Iterable[Example]]:
    """A student's training corpus: the gold corpus, then silver sentences (`GoldAndSilver`).

    gold (Path): The gold DocBin (or a directory of them), as spaCy's corpus reads it.
    silver (Optional[Path]): A DocBin written by `python -m spacy_flat silver`; None: gold only.
    silver_ratio (float): Silver examples per gold example; 0 for none.
    max_length (int): Longer docs are left out (spaCy's corpus setting); 0 for no limit.
    limit (int): Read at most this many gold docs; 0 for all.
    RETURNS (Callable[[Language], Iterable[Example]]): The reader.
    """
    return GoldAndSilver(gold, silver, silver_ratio, max_length, limit)
