"""What the tests share: the tiny corpus, a small lexicon, small pipelines of each architecture, and
a counter of the operations that wait for a device. Fixtures are in conftest.py."""

import json
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy
import pytest
import spacy
import torch
from spacy.language import Language
from spacy.training import Example
from spacy.util import fix_random_seed
from torch.utils._python_dispatch import TorchDispatchMode

from spacy_flat.lattice.lexicon import Lexicon

TESTS = Path(__file__).parent
ROOT = TESTS.parent
SHARED = ROOT.parent / "shared"
TINY = TESTS / "data" / "tiny.jsonl"

# Words for a small lexicon, one a line (benchmarks/tools/saved_pipelines.py reads the same file); tests
# that need jieba's full dictionary load it themselves.
SMALL_WORDS = (TESTS / "data" / "small_words.txt").read_text(encoding="utf8").split()

needs_shared = pytest.mark.skipif(not SHARED.exists(), reason=f"{SHARED} (the shared data) is absent")


def tiny_records() -> List[dict]:
    return [json.loads(line) for line in TINY.read_text(encoding="utf8").splitlines() if line.strip()]


def tiny_examples(nlp: Language) -> List[Example]:
    examples = []
    for rec in tiny_records():
        spans = [(s, e + 1, lab) for lab, surf in rec["label"].items() for pos in surf.values() for s, e in pos]
        examples.append(Example.from_dict(nlp.make_doc(rec["text"]), {"entities": spans}))
    return examples


def small_lexicon() -> Callable[[], Lexicon]:
    return lambda: Lexicon(SMALL_WORDS)


def small_config() -> dict:
    """A small, fast model (the defaults are the paper's sizes)."""
    return {
        "model": {
            "@architectures": "spacy-flat.FlatTagger.v2",
            "width": 32,
            "n_heads": 4,
            "ffn_width": 64,
            "word_width": 16,
            "word_rows": 500,
            "embed_dropout": 0.0,
            "dropout": 0.0,
            "output_dropout": 0.0,
        }
    }


def build_small(steps: int = 120, seed: int = 0) -> Language:
    """A small FLAT pipeline with the small lexicon, trained on the tiny corpus."""
    return build_family("flat", steps=steps, seed=seed)


# The family's architectures at the small sizes, for tests that run each of them.
SMALL_SIZES = {"width": 32, "n_heads": 4, "ffn_width": 64, "embed_dropout": 0.0, "dropout": 0.0, "output_dropout": 0.0}
FAMILY = {
    "flat": small_config()["model"],
    "tener": {"@architectures": "spacy-flat.TenerTagger.v2", **SMALL_SIZES},
    "dcsan": {"@architectures": "spacy-flat.DcsanTagger.v2", **SMALL_SIZES, "word_width": 16, "word_rows": 500},
    "lattice_lstm": {
        "@architectures": "spacy-flat.LatticeLstmTagger.v2",
        "width": 32,
        "word_width": 16,
        "word_rows": 500,
        "embed_dropout": 0.0,
        "output_dropout": 0.0,
    },
}


def build_family(
    architecture: str,
    steps: int = 30,
    seed: int = 0,
    *,
    component: Optional[Dict[str, Any]] = None,
    losses: Optional[List[float]] = None,
    **settings: Any,
) -> Language:
    """A small pipeline of one of the family's architectures (FAMILY), with the small
    lexicon, trained on the tiny corpus; `settings` override the architecture's and
    `component` sets the component's own (`int8_inference`, ...). Each step's loss is
    appended to `losses` where it is given."""
    fix_random_seed(seed)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config={**(component or {}), "model": {**FAMILY[architecture], **settings}})
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    optimizer = nlp.create_optimizer()
    for _ in range(steps):
        step = nlp.update(examples, sgd=optimizer, losses={})
        if losses is not None:
            losses.append(step["flat_ner"])
    return nlp


# Texts a saved pipeline is checked on: two short ones, an empty one and one of 45 characters.
ROUND_TRIP_TEXTS = ["张三在北京大学工作。", "李四", "", "王五住在上海，在华为公司任职。" * 3]


def saved_and_loaded(nlp: Language, path: Path) -> Language:
    """`nlp` saved to `path` and loaded again: the loaded pipeline gives the same scores to every
    text of ROUND_TRIP_TEXTS, and its batches the entities `nlp` gives each text alone (some at least).
    RETURNS: the loaded pipeline."""
    nlp.to_disk(path)
    loaded = spacy.load(path)
    for text in ROUND_TRIP_TEXTS:
        if text:
            numpy.testing.assert_allclose(scores_of(loaded, text), scores_of(nlp, text), rtol=1e-5, atol=1e-5)
    one_by_one = [[(e.start_char, e.end_char, e.label_) for e in nlp(t).ents] for t in ROUND_TRIP_TEXTS]
    batched = [
        [(e.start_char, e.end_char, e.label_) for e in d.ents] for d in loaded.pipe(ROUND_TRIP_TEXTS, batch_size=4)
    ]
    assert any(one_by_one) and batched == one_by_one
    return loaded


def scores_of(nlp: Language, text: str) -> numpy.ndarray:
    """The emission scores `flat_ner`'s model gives `text`, as the component segments it."""
    ner = nlp.get_pipe("flat_ner")
    segments, _ = ner.segmenter.segments([nlp.make_doc(text)])
    return ner.model.predict(segments)


def one_segment_per_group(monkeypatch: pytest.MonkeyPatch) -> List[int]:
    """Make the group loop encode each segment on its own, as the attention
    budget does for long documents. RETURNS: the group count of each call."""
    import spacy_flat.layers.flat_model as groups_module
    from spacy_flat.lattice.batching import budget_batches

    counts: List[int] = []

    def one_each(lengths, **_):  # type: ignore[no-untyped-def]
        groups = list(budget_batches(lengths, pair_budget=1))
        counts.append(len(groups))
        return iter(groups)

    monkeypatch.setattr(groups_module, "budget_batches", one_each)
    return counts


class SyncCounter(TorchDispatchMode):
    """Counts the operations that make a GPU wait for the host: reading a value
    (`_local_scalar_dense`), a `nonzero` (its size is data), and copies to the CPU.
    On CPU tensors the same operations are dispatched, so they are counted here too."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: List[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        name = func.__name__
        # Ops whose output size is data (they wait for the device inside), and boolean-mask indexing.
        sized = ("_local_scalar_dense", "nonzero", "item", "masked_select", "unique", "_unique", "repeat_interleave")
        indices = args[1] if name.startswith("index.") and len(args) > 1 else []
        masks = any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
        reads = name.startswith(sized) or masks
        if reads or (name.startswith("_to_copy") and str(kwargs.get("device", "")) == "cpu"):
            self.seen.append(name)
        return func(*args, **kwargs)


def heading_anchors(text: str) -> set:
    """RETURNS (set): The fragments GitHub gives the headings of a Markdown text."""
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+)$", text, re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found
