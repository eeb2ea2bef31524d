"""The `flat_ner` component: spaCy glue around the model of any registered architecture.

It works in character offsets throughout (lattice, gold, output), so it runs in
`spacy.blank("zh")` and behind word segmenters alike, and does no tensor math. One
class: its labels and set-up, prediction, learning from gold entities, and saving (what
it learned, its resources and the model weights, in spaCy's bytes and disk layouts; loading collects the parts first and
applies them together, so `exclude` works for every part and the settings a pipeline's
config gives are never overwritten by saved ones).
"""

import logging
import warnings
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, cast

import numpy
import srsly
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import from_bytes, from_disk, to_bytes, to_disk
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer
from thinc.types import Floats3d

from ..decoding.boundaries import BoundaryRules
from ..decoding.entities import ALIGNMENT_MODES
from ..decoding.tags import TagSet
from ..errors import PipelineFileError
from ..lattice.char_vocab import CharVocab
from ..lattice.lexicon import Lexicon
from ..lattice.loaders import create_jieba_lexicon, create_lac_char_vectors
from ..lattice.resources import OPTIONAL_PARTS, PARTS, FlatResources, Part
from ..lattice.windows import Segment, Segmenter
from ..lattice.word_counts import store_word_counts
from ..layers import TorchTagger, set_resources
from ..layers.losses import DeviceLosses
from .confidence import check_threshold, decode_docs, write_entities
from .gold import gold_segments

logger = logging.getLogger("spacy.flat")

# Where decoding runs: "auto" picks torch on the model's device off the CPU, NumPy on it.
DECODING_MODES = ("auto", "numpy", "torch")


class BoundaryRulesMissing(UserWarning):
    """A loaded pipeline asks for boundary rules it never learned."""


# What `cfg` holds that training learned; everything else in it comes from the config.
LEARNED = ("labels", "feature_width", "boundaries", "word_types", "temperature")


class FlatNER(TrainablePipe):
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
        constrain_boundaries: bool = True,
        scores_key: Optional[str] = "flat_ner",
        threshold: float = 0.0,
        decoding: str = "auto",
        int8_inference: bool = False,
        normalize_script: bool = False,
        skip_spaces: bool = False,
        scorer: Optional[Callable] = None,
    ) -> None:
        if alignment_mode not in ALIGNMENT_MODES:
            raise ValueError(f"alignment_mode must be one of {ALIGNMENT_MODES}, got {alignment_mode!r}")
        if decoding not in DECODING_MODES:
            raise ValueError(f"decoding must be one of {DECODING_MODES}, got {decoding!r}")
        check_threshold(threshold, scores_key)
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
            "constrain_boundaries": constrain_boundaries,
            # doc.spans key of the entities' probabilities (None: not computed), and the least kept.
            "scores_key": scores_key,
            "threshold": threshold,
            # Where Viterbi and the probabilities run: "auto" (the model's device if not a CPU), "numpy", "torch".
            "decoding": decoding,
            # Predict on a CPU through an int8 copy of the tagger's linear layers (`nn/quantized.py`).
            "int8_inference": int8_inference,
            # Read traditional characters as simplified ones (`lattice/scripts.py`); offsets stay the doc's.
            "normalize_script": normalize_script,
            # Read past spaces beside Chinese characters (`lattice/spaces.py`); offsets stay the doc's.
            "skip_spaces": skip_spaces,
            # Divides the CRF's potentials for the probabilities; fitted on dev by `calibrate`.
            "temperature": 1.0,
            # What the training entities allow (BoundaryRules), set at initialization.
            "boundaries": None,
            # The lexicon's word types the model has embeddings for, set at initialization.
            "word_types": [],
        }
        if int8_inference:
            self.tagger.int8_inference = True
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
    def tag_set(self) -> TagSet:
        """RETURNS (TagSet): The BILUO tags of the labels."""
        return self._tag_set

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
        return Segmenter(
            self.cfg["window_size"],
            self.cfg["window_overlap"],
            bool(self.cfg.get("normalize_script", False)),
            bool(self.cfg.get("skip_spaces", False)),
        )

    @property
    def boundary_rules(self) -> Optional[BoundaryRules]:
        """RETURNS (Optional[BoundaryRules]): The rules decoding obeys; None if off or learned by no initialization."""
        return BoundaryRules.from_dict(self.cfg.get("boundaries")) if self.cfg.get("constrain_boundaries") else None

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
        bigram_vectors: Optional[Callable[[], Lexicon]] = None,
        word_counts: Optional[Callable[[], Dict[str, float]]] = None,
    ) -> None:
        """Set labels, load the lexicon and character vectors, build the model.

        get_examples (Callable[[], Iterable[Example]]): Training examples.
        nlp (Language): The pipeline.
        labels (Optional[Sequence[str]]): Labels; read from the examples if None.
        lexicon (Optional[Callable[[], Lexicon]]): Lexicon loader; jieba's dict.txt if None.
        char_vectors (Optional[Callable]): Character-vector loader; jieba's LAC table if None.
        bigram_vectors (Optional[Callable[[], Lexicon]]): Pretrained bigram table
            (spacy-flat.word2vec_bigram_vectors.v1); needs the model's bigram_vectors = true.
        word_counts (Optional[Callable[[], Dict[str, float]]]): Word frequencies for
            DC-SAN's word sets (spacy-flat.word_counts.v1); counted on the training
            texts if None. Other architectures do not read them.
        """
        validate_get_examples(get_examples, "FlatNER.initialize")
        entities = [ent for eg in get_examples() for ent in eg.reference.ents]
        labels = sorted({*self.labels, *(ent.label_ for ent in entities)}) if labels is None else labels
        if self.cfg["constrain_boundaries"]:
            rules = BoundaryRules.learn(ent.text for ent in entities)
            self.cfg["boundaries"] = rules.to_dict()
            for line in rules.describe():
                logger.info("%s: %s", self.name, line)
        if not labels:
            raise ValueError("flat_ner found no entity labels: the training data has no entities")
        self.cfg["labels"] = sorted(set(labels))
        self._unknown_labels = set()
        lexicon_ = (lexicon or create_jieba_lexicon())()
        char_vocab, table = (char_vectors or create_lac_char_vectors())()
        self.tagger.check_char_width(table, self.name)
        bigrams = bigram_vectors() if bigram_vectors is not None else None
        if bigrams is not None and not self.tagger.module.embeddings.use_bigram_vectors:
            raise ValueError(
                f"A bigram table was given but the model does not read it: set "
                f"[components.{self.name}.model] bigram_vectors = true"
            )
        if self.tagger.module.encoder.weighs_words:
            texts = (eg.reference.text for eg in get_examples())
            logger.info("%s: %s", self.name, store_word_counts(lexicon_, texts, word_counts))
        self.resources = FlatResources(lexicon_, char_vocab, bigrams)
        self.cfg["word_types"] = list(lexicon_.types)
        # Infers the width of transformer features, if the model has them.
        self.model.initialize()
        self.cfg["feature_width"] = self.model.get_dim("nF") if self.model.has_dim("nF") else 0
        self._configure()
        self.tagger.set_char_vectors(table)

    def _configure(self) -> None:
        """Rebuild the shapes that depend on data, before weights are set or loaded."""
        assert self.resources is not None
        self._tag_set = TagSet(self.labels)
        self.tagger.configure(
            self.resources, self._tag_set, self.cfg.get("feature_width", 0), len(self.cfg.get("word_types", []))
        )
        set_resources(self.model, self.resources)

    # -- prediction -------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> List[List[Any]]:
        """Predict character spans per doc.

        docs (Iterable[Doc]): The docs.
        RETURNS (List[List[Any]]): (start_char, end_char, label, probability) spans
            per doc; (start_char, end_char, label) when `scores_key` is None.
        """
        self._require_initialized()
        scored = self.cfg.get("scores_key") is not None
        temperature = self.cfg.get("temperature", 1.0)
        decoded = decode_docs(
            list(docs),
            self.segmenter,
            self.tagger,
            self.boundary_rules,
            self.tag_set,
            on_device=self.decodes_on_device,
            temperature=temperature,
            probabilities=scored,
        )
        if not scored:
            return decoded.spans()
        return decoded.scored(temperature, self.cfg["threshold"])

    @property
    def decodes_on_device(self) -> bool:
        """RETURNS (bool): Whether prediction decodes in torch on the model's device (`decoding`:
        "torch", or "auto" with the model off the CPU, where the NumPy recursions are faster)."""
        mode = self.cfg.get("decoding", "auto")
        return mode == "torch" or (mode == "auto" and self.tagger.device.type != "cpu")

    def set_annotations(self, docs: Iterable[Doc], spans: List[List[Any]]) -> None:
        """Write `doc.ents` from character spans, snapping to tokens by `alignment_mode`,
        and their probabilities to `doc.spans[scores_key]` when they have them."""
        for doc, doc_spans in zip(docs, spans):
            write_entities(
                doc, doc_spans, self.cfg["alignment_mode"], self.alignment_report, self.cfg.get("scores_key")
            )

    def _require_resources(self) -> FlatResources:
        self._require_initialized()
        assert self.resources is not None
        return self.resources

    # -- learning ---------------------------------------------------------

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
        on_device = isinstance(losses, DeviceLosses)
        loss: Any  # a float, or a tensor left on the device for DeviceLosses
        loss, d_scores = self.tagger.loss(scores, gold, read=not on_device)
        backprop(d_scores)
        if on_device:  # read when the loop logs, not at every step
            cast(DeviceLosses, losses).add(self.name, loss)
        else:
            losses[self.name] += float(loss)
        if sgd is not None:
            self.finish_update(sgd)
        return losses

    def _training_segments(self, examples: Sequence[Example]) -> Tuple[List[Segment], List[List[int]]]:
        segments, gold, unknown = gold_segments(examples, self.segmenter, self._tag_set)
        if unknown:
            self._warn_unknown_labels(unknown)
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
        loss, d_scores = self.tagger.loss(scores, gold)
        return float(loss), d_scores

    # -- saving -----------------------------------------------------------

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        serializers: Dict[str, Callable[[], Any]] = {
            "cfg": lambda: srsly.json_dumps(self.cfg),
            **self._require_resources().part_writers(),
            "model": self.model.to_bytes,
        }
        return to_bytes(serializers, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "FlatNER":
        loaded = _Loaded()
        deserializers: Dict[str, Callable[[bytes], Any]] = {
            "cfg": lambda b: loaded.cfg.update(srsly.json_loads(b)),
            **{name: partial(loaded.read_part, name) for name in PARTS},
            "model": lambda b: setattr(loaded, "weights", lambda: self.model.from_bytes(b)),
        }
        from_bytes(bytes_data, deserializers, exclude)
        self._apply(loaded)
        return self

    def to_disk(self, path: Path, *, exclude: Iterable[str] = tuple()) -> None:
        writers = self._require_resources().part_writers()
        serializers: Dict[str, Callable[[Path], Any]] = {
            "cfg.json": lambda p: srsly.write_json(p, self.cfg),
            **{f"{name}.msgpack": partial(_write_file, write) for name, write in writers.items()},
            "model": lambda p: self.model.to_disk(p),
        }
        to_disk(path, serializers, exclude)

    def from_disk(self, path: Path, *, exclude: Iterable[str] = tuple()) -> "FlatNER":
        def read(name: str) -> Path:
            file_path = Path(path) / name
            if not file_path.exists():
                raise PipelineFileError(f"The saved '{self.name}' component lacks {file_path}")
            return file_path

        def read_part(name: str, _: Path) -> None:
            file_path = Path(path) / f"{name}.msgpack"
            if name in OPTIONAL_PARTS and not file_path.exists():
                return
            loaded.read_part(name, read(file_path.name).read_bytes(), str(file_path))

        loaded = _Loaded()
        deserializers: Dict[str, Callable[[Path], Any]] = {
            "cfg.json": lambda p: loaded.cfg.update(srsly.read_json(read("cfg.json"))),
            **{f"{name}.msgpack": partial(read_part, name) for name in PARTS},
            "model": lambda p: setattr(loaded, "weights", lambda: self.model.from_disk(read("model"))),
        }
        from_disk(path, deserializers, exclude)
        self._apply(loaded)
        return self

    def _apply(self, loaded: "_Loaded") -> None:
        """Take the learned state, set the resources, shape the model, load its weights."""
        for key in LEARNED:
            if key in loaded.cfg:
                self.cfg[key] = loaded.cfg[key]
        if loaded.cfg and self.cfg.get("constrain_boundaries") and self.cfg.get("boundaries") is None:
            warnings.warn(
                f"'{self.name}' was saved without entity-boundary rules (by spacy-flat 0.2.0 or earlier, or trained "
                "with constrain_boundaries = false), so it decodes without them; train it again to learn them",
                BoundaryRulesMissing,
                stacklevel=3,
            )
        if loaded.parts or self.resources is not None:
            self.resources = FlatResources.from_parts(loaded.parts, self.resources, self.name)
        if loaded.weights is None:
            # Weights kept (or not yet there): reshape only a model never shaped.
            if self.resources is not None and not self.is_initialized:
                self._configure()
            return
        if self.resources is None:
            raise PipelineFileError(f"The saved '{self.name}' component has no lexicon or character vocabulary")
        self._configure()
        try:
            loaded.weights()
        except PipelineFileError:
            raise
        except Exception as err:
            raise PipelineFileError(f"The saved '{self.name}' model weights could not be loaded: {err}") from err


class _Loaded:
    """The parts read so far, applied together once every part is read."""

    def __init__(self) -> None:
        self.cfg: Dict[str, Any] = {}
        self.parts: Dict[str, Part] = {}
        self.weights: Optional[Callable[[], Any]] = None

    def read_part(self, name: str, data: bytes, source: str = "<bytes>") -> None:
        self.parts[name] = FlatResources.read_part(name, data, source)


def _write_file(write: Callable[[], bytes], path: Path) -> None:
    Path(path).write_bytes(write())
