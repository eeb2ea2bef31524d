"""The `flat_ner` component: spaCy glue around the FLAT model.

It works in character offsets throughout (lattice, gold, output), so it runs in
`spacy.blank("zh")` and behind word segmenters alike, and does no tensor math.
"""

import logging
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import numpy
import srsly
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import filter_spans, from_bytes, from_disk, to_bytes, to_disk
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer, set_dropout_rate
from thinc.types import Floats3d

from .batching import budget_batches
from .char_vocab import CharVocab
from .errors import PipelineFileError
from .lexicon import Lexicon
from .loaders import create_jieba_lexicon, create_lac_char_vectors
from .model import crf_decode, crf_loss, set_char_vectors, set_resources, torch_module
from .tags import CharSpan, TagSet
from .windows import Window, merge_window_spans, plan_windows

logger = logging.getLogger("spacy_flat")

DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy-flat.FlatTagger.v1"
width = 160
n_heads = 8
ffn_width = 480
n_layers = 1
char_width = 128
word_width = 64
word_rows = 20000
bigram_width = 0
bigram_rows = 0
bigram_vectors = false
max_words = -1
embed_dropout = 0.5
dropout = 0.15
attention_dropout = 0.0
output_dropout = 0.3
scaled = true
mask_self_matched = false
max_distance = -1
head_only = false
mixed_precision = false
"""

ALIGNMENT_MODES = ("strict", "contract", "expand")


@Language.factory(
    "flat_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type"],
    default_config={
        "model": Config().from_str(DEFAULT_MODEL_CONFIG)["model"],
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
    model: Model[List[Doc], Floats3d],
    alignment_mode: str,
    window_size: int,
    window_overlap: int,
    scorer: Optional[Callable],
) -> "FlatNER":
    """Create a FLAT named-entity recognizer.

    model (Model[List[Doc], Floats3d]): The FLAT model.
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


class FlatNER(TrainablePipe):
    """Chinese NER with the Flat-Lattice Transformer (Li et al., 2020)."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model[List[Doc], Floats3d],
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
            "n_chars": 0,
            "vector_width": 0,
            "alignment_mode": alignment_mode,
            "window_size": window_size,
            "window_overlap": window_overlap,
        }
        self.lexicon: Optional[Lexicon] = None
        self.char_vocab: Optional[CharVocab] = None
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
    def is_initialized(self) -> bool:
        return self.lexicon is not None and self.char_vocab is not None and torch_module(self.model).crf is not None

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
        self.lexicon = (lexicon or create_jieba_lexicon())()
        char_vocab, table = (char_vectors or create_lac_char_vectors())()
        module = torch_module(self.model)
        if table.shape[1] != module.char_width:
            raise ValueError(
                f"Character vectors have width {table.shape[1]} but the model's char_width is "
                f"{module.char_width}; set [components.{self.name}.model] char_width = {table.shape[1]}"
            )
        self.char_vocab = char_vocab
        self.cfg["n_chars"] = len(char_vocab)
        self.cfg["vector_width"] = self.lexicon.vector_width
        self.cfg["feature_width"] = _feature_width(self.model, nlp)
        self._configure()
        set_char_vectors(self.model, table)

    def _configure(self) -> None:
        """Rebuild the shapes that depend on data, before weights are set or loaded."""
        assert self.lexicon is not None and self.char_vocab is not None
        self._tag_set = TagSet(self.labels)
        torch_module(self.model).configure(
            feature_width=self.cfg.get("feature_width", 0),
            n_chars=self.cfg["n_chars"],
            vector_width=self.cfg["vector_width"],
            n_tags=len(self._tag_set),
            transitions=self._tag_set.allowed_transitions(),
            starts=self._tag_set.allowed_starts(),
            ends=self._tag_set.allowed_ends(),
        )
        set_resources(self.model, self.lexicon, self.char_vocab)

    # -- windows ----------------------------------------------------------

    def _windows(self, text: str, protected: Sequence[Tuple[int, int]] = ()) -> List[Window]:
        if self.model.attrs.get("whole_docs"):  # transformer features exist for whole docs only
            return [Window(0, len(text), 0, len(text))]
        return plan_windows(text, self.cfg["window_size"], self.cfg["window_overlap"], protected)

    def _segments(self, docs: Sequence[Doc]) -> Tuple[List[Doc], List[List[Window]]]:
        """Docs to encode: each short doc itself, each window of a long doc as a
        one-token doc (the model reads `doc.text` only)."""
        segments: List[Doc] = []
        plans: List[List[Window]] = []
        for doc in docs:
            # doc.text is rebuilt from every token on each access: read it once.
            text = doc.text
            plan = self._windows(text) if text else []
            plans.append(plan)
            if len(plan) == 1:
                segments.append(doc)
            else:
                segments.extend(_text_doc(doc.vocab, text[w.start : w.end]) for w in plan)
        return segments, plans

    # -- prediction -------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> List[List[CharSpan]]:
        """Predict character spans per doc.

        docs (Iterable[Doc]): The docs.
        RETURNS (List[List[CharSpan]]): (start_char, end_char, label) spans per doc.
        """
        self._require_initialized()
        docs = list(docs)
        segments, plans = self._segments(docs)
        spans_per_segment: List[List[CharSpan]] = []
        if segments:
            lengths = [len(segment.text) for segment in segments]
            found: Dict[int, List[CharSpan]] = {}
            for chunk in self._sub_batches(lengths):
                scores = self.model.predict([segments[i] for i in chunk])
                for i, ids in zip(chunk, crf_decode(self.model, scores, [lengths[i] for i in chunk])):
                    found[i] = self._tag_set.decode(ids)
            spans_per_segment = [found[i] for i in range(len(segments))]
        out: List[List[CharSpan]] = []
        pos = 0
        for plan in plans:
            if len(plan) <= 1:
                out.append(spans_per_segment[pos] if plan else [])
            else:
                out.append(merge_window_spans(plan, spans_per_segment[pos : pos + len(plan)]))
            pos += len(plan)
        return out

    def set_annotations(self, docs: Iterable[Doc], spans: List[List[CharSpan]]) -> None:
        """Write `doc.ents` from character spans, snapping to tokens by `alignment_mode`."""
        mode = self.cfg["alignment_mode"]
        for doc, doc_spans in zip(docs, spans):
            ents: List[Span] = []
            text = doc.text
            for start, end, label in doc_spans:
                # Entities never begin or end with whitespace; trim it off.
                while start < end and text[start].isspace():
                    start += 1
                while end > start and text[end - 1].isspace():
                    end -= 1
                if start == end:
                    self.alignment_report["dropped"] += 1
                    continue
                span = doc.char_span(start, end, label=label, alignment_mode=mode)
                if span is None or len(span) == 0:
                    self.alignment_report["dropped"] += 1
                    logger.debug("%s: span %d-%d %s has no token alignment", self.name, start, end, label)
                    continue
                exact = span.start_char == start and span.end_char == end
                self.alignment_report["exact" if exact else "snapped"] += 1
                ents.append(span)
            kept = filter_spans(ents)
            self.alignment_report["dropped"] += len(ents) - len(kept)
            doc.set_ents(kept, default="outside")

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
        if not segments:
            return losses
        set_dropout_rate(self.model, drop)
        # Sub-batches bound memory; their gradients add up before the optimizer step.
        for chunk in self._sub_batches([len(segment.text) for segment in segments]):
            scores, backprop = self.model.begin_update([segments[i] for i in chunk])
            loss, d_scores = crf_loss(self.model, scores, [gold[i] for i in chunk], n_rows=len(segments))
            backprop(d_scores)
            losses[self.name] += loss
        if sgd is not None:
            self.finish_update(sgd)
        return losses

    def _sub_batches(self, lengths: Sequence[int]) -> Iterator[List[int]]:
        """Group segment indices into batches under the attention budget
        (`budget_batches`). A transformer model takes its docs together, as its
        listener saw them, and applies the budget itself (`model.py`)."""
        if self.model.attrs.get("whole_docs"):
            yield sorted(range(len(lengths)), key=lengths.__getitem__)
            return
        yield from budget_batches(lengths)

    def _training_segments(self, examples: Sequence[Example]) -> Tuple[List[Doc], List[List[int]]]:
        """Docs to encode with their gold tag ids. Long docs are cut at points
        no gold entity crosses, so no entity is clipped."""
        segments: List[Doc] = []
        gold: List[List[int]] = []
        for eg in examples:
            doc = eg.predicted
            full = doc.text  # rebuilt from every token on each access: read it once
            if not full:
                continue
            spans = [(e.start_char, e.end_char, e.label_) for e in eg.reference.ents]
            unknown = {lab for _, _, lab in spans if lab not in self._tag_set.labels}
            if unknown:
                self._warn_unknown_labels(unknown)
                spans = [span for span in spans if span[2] not in unknown]
            for window in self._windows(full, [(s, e) for s, e, _ in spans]):
                a, b = window.own_start, window.own_end
                text = full[a:b]
                if not text:
                    continue
                inside = [(s - a, e - a, lab) for s, e, lab in spans if a <= s and e <= b]
                segments.append(doc if (a, b) == (0, len(full)) else _text_doc(doc.vocab, text))
                gold.append(self._tag_set.encode(inside, len(text)))
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
        return crf_loss(self.model, scores, gold)

    # -- serialization ----------------------------------------------------

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        self._require_initialized()
        assert self.lexicon is not None and self.char_vocab is not None
        serializers = {
            "cfg": lambda: srsly.json_dumps(self.cfg),
            "lexicon": self.lexicon.to_bytes,
            "char_vocab": self.char_vocab.to_bytes,
            "model": self.model.to_bytes,
        }
        return to_bytes(serializers, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "FlatNER":
        deserializers = {
            "cfg": lambda b: self.cfg.update(srsly.json_loads(b)),
            "lexicon": lambda b: setattr(self, "lexicon", Lexicon.from_bytes(b)),
            "char_vocab": lambda b: setattr(self, "char_vocab", CharVocab.from_bytes(b)),
            "model": lambda b: self._load_model(lambda: self.model.from_bytes(b)),
        }
        from_bytes(bytes_data, deserializers, exclude)
        return self

    def to_disk(self, path: Path, *, exclude: Iterable[str] = tuple()) -> None:
        self._require_initialized()
        assert self.lexicon is not None and self.char_vocab is not None
        lexicon, char_vocab = self.lexicon, self.char_vocab
        serializers = {
            "cfg.json": lambda p: srsly.write_json(p, self.cfg),
            "lexicon.msgpack": lambda p: Path(p).write_bytes(lexicon.to_bytes()),
            "char_vocab.msgpack": lambda p: Path(p).write_bytes(char_vocab.to_bytes()),
            "model": lambda p: self.model.to_disk(p),
        }
        to_disk(path, serializers, exclude)

    def from_disk(self, path: Path, *, exclude: Iterable[str] = tuple()) -> "FlatNER":
        def read(name: str) -> Path:
            file_path = Path(path) / name
            if not file_path.exists():
                raise PipelineFileError(f"The saved '{self.name}' component lacks {file_path}")
            return file_path

        deserializers = {
            "cfg.json": lambda p: self.cfg.update(srsly.read_json(read("cfg.json"))),
            "lexicon.msgpack": lambda p: setattr(
                self, "lexicon", Lexicon.from_bytes(read("lexicon.msgpack").read_bytes(), source=str(p))
            ),
            "char_vocab.msgpack": lambda p: setattr(
                self,
                "char_vocab",
                CharVocab.from_bytes(read("char_vocab.msgpack").read_bytes(), source=str(p)),
            ),
            "model": lambda p: self._load_model(lambda: self.model.from_disk(read("model"))),
        }
        from_disk(path, deserializers, exclude)
        return self

    def _load_model(self, load: Callable[[], Any]) -> None:
        self._configure()
        try:
            load()
        except PipelineFileError:
            raise
        except Exception as err:
            raise PipelineFileError(f"The saved '{self.name}' model weights could not be loaded: {err}") from err


def _feature_width(model: Model, nlp: Optional[Language]) -> int:
    """Width of the transformer features of a FLAT+BERT model; 0 for plain FLAT."""
    if not model.has_ref("tok2vec"):
        return 0
    tok2vec = model.get_ref("tok2vec")
    width = tok2vec.maybe_get_dim("nO")
    if width is None and nlp is not None:
        # A transformer listener learns its width from its upstream component.
        for _, component in nlp.pipeline:
            upstream = getattr(component, "model", None)
            if hasattr(component, "listener_map") and upstream is not None and upstream.has_dim("nO"):
                width = upstream.get_dim("nO")
    if not width:
        raise ValueError(
            "flat_ner cannot tell the width of its transformer features: initialize the "
            "transformer component first or set the listener's width"
        )
    return int(width)


def _text_doc(vocab: Vocab, text: str) -> Doc:
    """A one-token doc holding `text`: the model reads `doc.text` alone."""
    return Doc(vocab, words=[text], spaces=[False])
