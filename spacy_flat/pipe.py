"""The `flat_ner` component: spaCy glue around the FLAT model.

It works in character offsets throughout (lattice, gold, output), so it runs in
`spacy.blank("zh")` and behind word segmenters alike, and does no tensor math.
"""

import logging
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer
from thinc.types import Floats3d

from .char_vocab import CharVocab
from .entities import ALIGNMENT_MODES, set_char_entities
from .layers import TorchTagger, set_resources
from .lexicon import Lexicon
from .loaders import create_jieba_lexicon, create_lac_char_vectors
from .resources import FlatResources
from .saving import SavedWithResources
from .settings import default_config
from .tags import TagSet
from .types import CharSpan
from .windows import Segment, Segmenter

logger = logging.getLogger("spacy_flat")


@Language.factory(
    "flat_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type"],
    default_config={
        "model": default_config("spacy-flat.FlatTagger.v1"),
        "alignment_mode": "expand",
        "window_size": 512,
        "window_overlap": 32,
        "scorer": {"@scorers": "spacy-flat.char_ner_scorer.v1"},
    },
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
)
def make_flat_ner(
    nlp: Language,
    name: str,
    model: Model[List[Segment], Floats3d],
    alignment_mode: str,
    window_size: int,
    window_overlap: int,
    scorer: Optional[Callable],
) -> "FlatNER":
    """Create a FLAT named-entity recognizer.

    model (Model[List[Segment], Floats3d]): The FLAT model (either architecture).
    alignment_mode (str): How predicted character spans snap to tokens when the
        tokenizer's tokens are longer than characters: "strict", "contract" or "expand".
    window_size (int): Longest text encoded at once; longer docs are cut into
        windows at sentence punctuation. <= 0 never cuts.
    window_overlap (int): Context characters shared by neighbouring windows.
    scorer (Optional[Callable]): The scoring method.
    """
    return FlatNER(
        nlp.vocab,
        model,
        name,
        alignment_mode=alignment_mode,
        window_size=window_size,
        window_overlap=window_overlap,
        scorer=scorer,
    )


class FlatNER(SavedWithResources, TrainablePipe):
    """Chinese NER with the Flat-Lattice Transformer (Li et al., 2020)."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model[List[Segment], Floats3d],
        name: str = "flat_ner",
        *,
        alignment_mode: str = "expand",
        window_size: int = 512,
        window_overlap: int = 32,
        scorer: Optional[Callable] = None,
    ) -> None:
        if alignment_mode not in ALIGNMENT_MODES:
            raise ValueError(f"alignment_mode must be one of {ALIGNMENT_MODES}, got {alignment_mode!r}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg: Dict[str, Any] = {
            "labels": [],
            # The width of transformer features, inferred when the model is initialized.
            "feature_width": 0,
            "alignment_mode": alignment_mode,
            "window_size": window_size,
            "window_overlap": window_overlap,
        }
        self.resources: Optional[FlatResources] = None
        self._tag_set = TagSet([])
        # Spans that could not be placed on token boundaries, since creation.
        self.alignment_report: Dict[str, int] = {"exact": 0, "snapped": 0, "dropped": 0}
        # Gold labels met in training that the model has no tags for, already warned about.
        self._unknown_labels: Set[str] = set()

    # -- labels -----------------------------------------------------------

    @property
    def labels(self) -> Tuple[str, ...]:
        """RETURNS (Tuple[str, ...]): The entity labels."""
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    def add_label(self, label: str) -> int:
        """Add an entity label before initialization. RETURNS (int): 1 if added."""
        if not isinstance(label, str):
            raise ValueError(f"Labels are strings, got {label!r}")
        if label in self.labels:
            return 0
        if self.is_initialized:
            raise ValueError("flat_ner cannot take new labels after initialization; retrain instead")
        self.cfg["labels"] = sorted((*self.labels, label))
        return 1

    @property
    def lexicon(self) -> Optional[Lexicon]:
        """RETURNS (Optional[Lexicon]): The lexicon, once initialized or loaded."""
        return None if self.resources is None else self.resources.lexicon

    @property
    def char_vocab(self) -> Optional[CharVocab]:
        """RETURNS (Optional[CharVocab]): The character rows, once initialized or loaded."""
        return None if self.resources is None else self.resources.char_vocab

    @property
    def segmenter(self) -> Segmenter:
        """RETURNS (Segmenter): How docs are cut into windows, from `cfg` (which may change at run time)."""
        return Segmenter(self.cfg["window_size"], self.cfg["window_overlap"])

    @property
    def tagger(self) -> TorchTagger:
        """RETURNS (TorchTagger): The model's torch side: shapes, CRF loss and decoding."""
        return TorchTagger(self.model)

    @property
    def is_initialized(self) -> bool:
        return self.resources is not None and self.tagger.is_configured

    def _require_initialized(self) -> None:
        if not self.is_initialized:
            raise ValueError(
                f"The '{self.name}' component is not initialized: call nlp.initialize() "
                "(or train it with `spacy train`) before using it"
            )

    # -- set-up -----------------------------------------------------------

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Sequence[str]] = None,
        lexicon: Optional[Callable[[], Lexicon]] = None,
        char_vectors: Optional[Callable[[], Tuple[CharVocab, numpy.ndarray]]] = None,
    ) -> None:
        """Set labels, load the lexicon and character vectors, build the model.

        get_examples (Callable[[], Iterable[Example]]): Training examples.
        nlp (Language): The pipeline.
        labels (Optional[Sequence[str]]): Labels; read from the examples if None.
        lexicon (Optional[Callable[[], Lexicon]]): Lexicon loader; jieba's dict.txt if None.
        char_vectors (Optional[Callable]): Character-vector loader; jieba's LAC table if None.
        """
        validate_get_examples(get_examples, "FlatNER.initialize")
        if labels is None:
            found = set(self.labels)
            for eg in get_examples():
                found.update(ent.label_ for ent in eg.reference.ents)
            labels = sorted(found)
        if not labels:
            raise ValueError("flat_ner found no entity labels: the training data has no entities")
        self.cfg["labels"] = sorted(set(labels))
        self._unknown_labels = set()
        lexicon_ = (lexicon or create_jieba_lexicon())()
        char_vocab, table = (char_vectors or create_lac_char_vectors())()
        self.tagger.check_char_width(table, self.name)
        self.resources = FlatResources(lexicon_, char_vocab)
        # Infers the width of transformer features, if the model has them.
        self.model.initialize()
        self.cfg["feature_width"] = self.model.get_dim("nF") if self.model.has_dim("nF") else 0
        self._configure()
        self.tagger.set_char_vectors(table)

    def _configure(self) -> None:
        """Rebuild the shapes that depend on data, before weights are set or loaded."""
        assert self.resources is not None
        self._tag_set = TagSet(self.labels)
        self.tagger.configure(self.resources, self._tag_set, self.cfg.get("feature_width", 0))
        set_resources(self.model, self.resources)

    # -- prediction -------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> List[List[CharSpan]]:
        """Predict character spans per doc.

        docs (Iterable[Doc]): The docs.
        RETURNS (List[List[CharSpan]]): (start_char, end_char, label) spans per doc.
        """
        self._require_initialized()
        segmenter = self.segmenter
        segments, plans = segmenter.segments(list(docs))
        if not any(len(segment) for segment in segments):
            return [[] for _ in plans]
        scores = self.model.predict(segments)
        ids = self.tagger.decode(scores, [len(segment) for segment in segments])
        return segmenter.merge(plans, [self._tag_set.decode(row) for row in ids])

    def set_annotations(self, docs: Iterable[Doc], spans: List[List[CharSpan]]) -> None:
        """Write `doc.ents` from character spans, snapping to tokens by `alignment_mode`."""
        for doc, doc_spans in zip(docs, spans):
            set_char_entities(doc, doc_spans, self.cfg["alignment_mode"], self.alignment_report)

    # -- training ---------------------------------------------------------

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Learn from a batch of examples. Empty docs are skipped."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "FlatNER.update")
        self._require_initialized()
        segments, gold = self._training_segments(examples)
        if not any(gold):
            return losses
        scores, backprop = self.model.begin_update(segments)
        loss, d_scores = self.tagger.loss(scores, gold)
        backprop(d_scores)
        losses[self.name] += loss
        if sgd is not None:
            self.finish_update(sgd)
        return losses

    def _training_segments(self, examples: Sequence[Example]) -> Tuple[List[Segment], List[List[int]]]:
        """Segments to encode with their gold tag ids; an empty doc has one
        empty segment, so the segments name every doc of the batch, in order."""
        segmenter = self.segmenter
        segments: List[Segment] = []
        gold: List[List[int]] = []
        for eg in examples:
            spans = [(e.start_char, e.end_char, e.label_) for e in eg.reference.ents]
            unknown = {lab for _, _, lab in spans if lab not in self._tag_set.labels}
            if unknown:
                self._warn_unknown_labels(unknown)
                spans = [span for span in spans if span[2] not in unknown]
            for segment, inside in segmenter.training_segments(eg.predicted, spans):
                segments.append(segment)
                gold.append(self._tag_set.encode(inside, len(segment)))
        return segments, gold

    def _warn_unknown_labels(self, labels: Set[str]) -> None:
        new = labels - self._unknown_labels
        if new:
            # Said once per label: a sourced model trained on data with other labels
            # would otherwise skip those entities without a word.
            self._unknown_labels |= new
            warnings.warn(
                f"'{self.name}' skips gold entities labelled {sorted(new)}: it has tags only for "
                f"{list(self.labels)}. Initialize it again (not from source) to learn new labels.",
                stacklevel=3,
            )

    def get_loss(self, examples: Iterable[Example], scores: Floats3d) -> Tuple[float, Floats3d]:
        """CRF loss and gradient of `scores` for the examples' reference entities."""
        _, gold = self._training_segments(list(examples))
        return self.tagger.loss(scores, gold)

    def _require_resources(self) -> FlatResources:
        self._require_initialized()
        assert self.resources is not None
        return self.resources
