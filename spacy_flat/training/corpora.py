"""Several corpora read as one training or dev corpus, each doc tagged with the corpus it came from.

Pooled as they are, MSRA's 41,728 training sentences would outweigh Weibo's 1,350 thirty to one. The pooled
reader keeps the largest corpus whole and repeats each smaller one up to a share that grows with its size to
the power `alpha` (temperature sampling, as multilingual models mix languages): 1 pools the corpora as they
are, 0 gives each the same weight. The repeats are fixed by the seed, so the corpus is the same list at every
epoch and spaCy's loop shuffles it as it shuffles any corpus, which keeps `spacy train` and the resumable
`train` at the same place after a stop.

Each reference doc carries its corpus's name in `doc.user_data["corpus"]`, which
`spacy-flat.pooled_ner_scorer.v1` reads to score each corpus on its own.
"""

import random
from pathlib import Path
from typing import Dict, Iterator, List, Union

from spacy.language import Language
from spacy.training import Corpus, Example
from spacy.util import registry

from ..pipeline.scorer import CORPUS_KEY


def pooled_counts(sizes: Dict[str, int], alpha: float) -> Dict[str, int]:
    """How many examples each corpus gives the pool: the largest all of its own, the others their share.

    sizes (Dict[str, int]): Examples per corpus.
    alpha (float): Each corpus's share is proportional to its size to this power, 0 to 1.
    RETURNS (Dict[str, int]): Examples per corpus in the pool; never fewer than the corpus has.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    empty = sorted(name for name, size in sizes.items() if size <= 0)
    if empty:
        raise ValueError(f"these corpora have no examples: {', '.join(empty)}")
    weights = {name: size**alpha for name, size in sizes.items()}
    largest = max(sizes, key=lambda name: sizes[name])
    # The largest corpus's share of the pool fixes the pool's size.
    total = sizes[largest] * sum(weights.values()) / weights[largest]
    return {name: max(size, round(total * weights[name] / sum(weights.values()))) for name, size in sizes.items()}


def repeat_to(examples: List[Example], count: int, rng: random.Random) -> List[Example]:
    """Each example `count // len` times, and a seeded draw without repeats for the remainder."""
    whole, rest = divmod(count, len(examples))
    return examples * whole + rng.sample(examples, rest)


class PooledCorpus:
    """Several DocBin corpora read as one, with the smaller ones repeated up to their share.

    paths (Dict[str, Path]): Each corpus's name and DocBin file (or folder of them), which the resumable
        `train` hashes to know the data again.
    alpha (float): Shares grow with size to this power.
    seed (int): Draws the repeated examples of the remainders.
    max_length (int): As `spacy.Corpus`'s: longer docs are skipped; 0 keeps all.
    """

    def __init__(self, paths: Dict[str, Path], alpha: float, seed: int, max_length: int) -> None:
        if not paths:
            raise ValueError("PooledCorpus needs at least one corpus in `paths`")
        self.paths = dict(sorted(paths.items()))
        self.alpha = alpha
        self.seed = seed
        self.corpora = {name: Corpus(path, max_length=max_length) for name, path in self.paths.items()}

    def __call__(self, nlp: Language) -> Iterator[Example]:
        examples: Dict[str, List[Example]] = {}
        for name, corpus in self.corpora.items():
            examples[name] = list(corpus(nlp))
            for eg in examples[name]:
                eg.reference.user_data[CORPUS_KEY] = name
        counts = pooled_counts({name: len(egs) for name, egs in examples.items()}, self.alpha)
        rng = random.Random(self.seed)
        for name, egs in examples.items():
            yield from repeat_to(egs, counts[name], rng)


@registry.readers("spacy-flat.PooledCorpus.v1")
def create_pooled_corpus(
    paths: Dict[str, Union[str, Path]],
    alpha: float = 1.0,
    seed: int = 0,
    max_length: int = 0,
) -> PooledCorpus:
    """Read several DocBin corpora as one, with the smaller ones repeated up to their share.

    paths (Dict[str, Union[str, Path]]): Each corpus's name and DocBin file (or folder of them).
    alpha (float): Shares grow with size to this power: 1 reads every example once (a dev set), 0 gives
        every corpus the largest one's size, 0.7 gives MSRA 68% of a pool with Weibo, Resume and UNER
        GSDSimp.
    seed (int): Draws the repeated examples of the remainders.
    max_length (int): As `spacy.Corpus.v1`'s: longer docs are skipped; 0 keeps all.
    RETURNS (PooledCorpus): The reader.
    """
    return PooledCorpus({name: Path(path) for name, path in paths.items()}, alpha, seed, max_length)
