"""Fixtures that pin behaviour across refactors: pipelines saved by an earlier
version, and the losses of a few `spacy train` steps on each config.

`python -m tests.compat pipelines` writes the saved pipelines (run once, at the
version they are named after; never rewritten by later code, or they would test
nothing). `python -m tests.compat losses [CONFIG...]` re-records the training losses
(of the configs named, or of those already recorded): run it only for a change that
is meant to change training, and say so in its commit.
"""

import io
import json
import sys
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy
import spacy
from spacy.language import Language
from spacy.util import fix_random_seed, registry

from spacy_flat.lattice.char_vocab import CharVocab
from spacy_flat.lattice.lexicon import Lexicon

from .util import ROOT, SHARED, SMALL_WORDS, TESTS, TINY, small_config, tiny_examples, tiny_records

COMPAT = TESTS / "data" / "compat"
# Texts whose entities the saved pipelines must keep predicting: the tiny corpus,
# unseen sentences, and a text long enough to be cut into windows.
PROBE_TEXTS = [r["text"] for r in tiny_records()] + [
    "王芳和李娜在上海的复旦大学见面。",
    "今天天气很好，张伟去了深圳的腾讯公司任职。",
    "清华大学的李娜出生在杭州，毕业后在南京工作。" * 6,
    "Hello张伟2024年在北京😀",
]
LOSS_STEPS = 4
LOSSES = COMPAT / "train_losses.json"
TINY_BERT = SHARED / "vectors" / "albert-tiny-chinese"
WORD_VECTORS = SHARED / "vectors" / "synonyms-wiki-w2v-100d" / "words.vector"


def small_char_vectors(width: int = 16) -> Callable[[], Tuple[CharVocab, numpy.ndarray]]:
    """A character table of the tiny corpus's characters, so a saved pipeline is kilobytes."""
    chars = sorted({c for text in PROBE_TEXTS for c in text})
    table = numpy.random.default_rng(1).normal(size=(len(chars), width)).astype("float32")

    def load() -> Tuple[CharVocab, numpy.ndarray]:
        vocab = CharVocab(chars)
        extra = numpy.zeros((len(vocab) - len(chars), width), dtype="float32")
        return vocab, numpy.vstack([table, extra])

    return load


def vector_lexicon(width: int = 8) -> Callable[[], Lexicon]:
    vectors = numpy.random.default_rng(2).normal(size=(len(SMALL_WORDS), width)).astype("float32")
    return lambda: Lexicon(SMALL_WORDS, vectors, normalize=True)


def compat_pipelines() -> Dict[str, Tuple[dict, Callable[[], Lexicon]]]:
    """name -> (component config, lexicon loader) of each saved pipeline."""
    plain = small_config()
    plain["model"]["char_width"] = 16
    plain["window_size"] = 24
    plain["window_overlap"] = 4
    full = small_config()
    full["model"].update(char_width=16, bigram_width=8, bigram_rows=64, bigram_vectors=True, n_layers=2, max_words=20)
    return {
        "plain": (plain, lambda: Lexicon(SMALL_WORDS)),
        "vectors_bigrams": (full, vector_lexicon()),
    }


def train_compat_pipeline(config: dict, lexicon: Callable[[], Lexicon], steps: int = 60) -> Language:
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=config)
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=lexicon, char_vectors=small_char_vectors())
    optimizer = nlp.create_optimizer()
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer)
    return nlp


def entities(nlp: Language) -> List[List[List]]:
    return [[[e.start_char, e.end_char, e.label_] for e in doc.ents] for doc in nlp.pipe(PROBE_TEXTS)]


def write_pipelines() -> None:
    from spacy_flat import __version__

    for name, (config, lexicon) in compat_pipelines().items():
        nlp = train_compat_pipeline(config, lexicon)
        path = COMPAT / f"{name}-{__version__}"
        nlp.to_disk(path)
        (path / "expected_entities.json").write_text(json.dumps(entities(nlp), ensure_ascii=False), encoding="utf8")
        print(f"wrote {path}")


# -- the losses of `spacy train` on each config ---------------------------

_recorded: List[Dict[str, float]] = []


@registry.loggers("spacy-flat-tests.loss_recorder.v1")
def loss_recorder() -> Callable:
    """A spaCy logger that keeps the losses of every evaluation step."""

    def setup(nlp: Language, stdout: io.IOBase = sys.stdout, stderr: io.IOBase = sys.stderr):
        def log_step(info: Dict) -> None:
            if info is not None:
                _recorded.append(dict(info["losses"]))

        return log_step, lambda: None

    return setup


def config_overrides(name: str, corpus: Path) -> dict:
    """Every config as it is, on the tiny corpus, a few steps, each one evaluated
    (so each step's losses are logged), with a short warm-up so the steps move
    the weights."""
    overrides = {
        "paths.train": str(corpus),
        "paths.dev": str(corpus),
        "training.max_steps": LOSS_STEPS,
        "training.max_epochs": 0,
        "training.eval_frequency": 1,
        "training.optimizer.learn_rate.warmup_steps": 1,
        "training.optimizer.learn_rate.total_steps": 100,
        "training.logger": {"@loggers": "spacy-flat-tests.loss_recorder.v1"},
    }
    if name in ("resume_trf.cfg", "resume_dcsan_trf.cfg"):
        overrides["paths.transformer"] = str(TINY_BERT)
    if name == "msra_news.cfg":
        overrides["paths.word_vectors"] = str(WORD_VECTORS)
        overrides["paths.bigram_vectors"] = str(tiny_bigram_table(corpus.parent / "bigrams.vec"))
    return overrides


def tiny_bigram_table(path: Path) -> Path:
    """A word2vec file of the tiny corpus's bigrams with fixed random 50-wide vectors,
    standing in for the bigram table `pretrain-vectors` writes."""
    bigrams = sorted({r["text"][i : i + 2] for r in tiny_records() for i in range(len(r["text"]) - 1)})
    bigrams = [b for b in bigrams if not any(c.isspace() for c in b)]
    vectors = numpy.random.RandomState(0).uniform(-1, 1, (len(bigrams), 50))
    rows = [f"{b} " + " ".join(f"{v:.4f}" for v in row) for b, row in zip(bigrams, vectors)]
    path.write_text(f"{len(rows)} 50\n" + "\n".join(rows) + "\n", encoding="utf8")
    return path


def train_losses(name: str, workdir: Path) -> List[float]:
    """flat_ner's loss at each of the first steps of `spacy train configs/NAME`."""
    from spacy.cli.train import train

    from spacy_flat.cli.convert import convert

    corpus = workdir / "tiny.spacy"
    if not corpus.exists():
        convert(TINY, corpus, log=io.StringIO())
    _recorded.clear()
    train(ROOT / "configs" / name, None, overrides=config_overrides(name, corpus))
    return [step["flat_ner"] for step in _recorded]


def write_losses(names: List[str]) -> None:
    """Re-record the losses of `names`, or of every config already recorded
    (configs whose inputs live outside ../shared, the pretrained ones, cannot run here)."""
    import tempfile

    losses = json.loads(LOSSES.read_text(encoding="utf8")) if LOSSES.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or sorted(losses):
            losses[name] = train_losses(name, Path(tmp))
    LOSSES.write_text(json.dumps(dict(sorted(losses.items())), indent=2) + "\n", encoding="utf8")
    print(json.dumps(losses, indent=2))


if __name__ == "__main__":
    COMPAT.mkdir(parents=True, exist_ok=True)
    if sys.argv[1] == "losses":
        write_losses(sys.argv[2:])
    else:
        write_pipelines()
