"""How `flat_ner` learns: from the examples' gold entities, and beside them from
a teacher's soft targets when one is set (`teaching`); from a teacher pipe
alone, in the shape of spaCy v4's `TrainablePipe.distill` and
`get_teacher_student_loss`; and what it gives a student when it is the teacher
(`soft_targets`).

Kept apart from the component, as saving is, so that the component stays the
glue of labels, set-up and prediction.
"""

import warnings
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, cast

from spacy.pipeline import TrainablePipe
from spacy.training import Example, validate_examples
from thinc.api import Model, Optimizer
from thinc.types import Floats3d

from ..decoding.boundaries import BoundaryRules
from ..decoding.tags import TagSet
from ..lattice.windows import Segment, Segmenter
from ..layers import TorchTagger
from ..layers.losses import DeviceLosses
from ..types import SoftTarget
from .gold import gold_segments
from .teaching import Teaching, check_labels, soft_loss


class LearnsFromExamples:
    """What `FlatNER` learns with; the component provides the attributes below."""

    name: str
    model: Model
    # A teacher to learn from beside the gold (distillation); never saved.
    teaching: Optional[Teaching]
    _tag_set: TagSet
    # Gold labels met in training that the model has no tags for, already warned about.
    _unknown_labels: Set[str]

    if TYPE_CHECKING:

        @property
        def labels(self) -> Tuple[str, ...]: ...

        @property
        def tag_set(self) -> TagSet: ...

        @property
        def segmenter(self) -> Segmenter: ...

        @property
        def boundary_rules(self) -> Optional[BoundaryRules]: ...

        @property
        def tagger(self) -> TorchTagger: ...

        def _require_initialized(self) -> None: ...

        def finish_update(self, sgd: Optimizer) -> None: ...

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Learn from a batch of examples, and from the teacher in `teaching` if one
        is set. Empty docs are skipped."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "FlatNER.update")
        self._require_initialized()
        segments, gold = self._training_segments(examples)
        if not any(gold) and self.teaching is None:
            return losses
        scores, backprop = self.model.begin_update(segments)
        on_device = isinstance(losses, DeviceLosses)
        loss: Any  # a float, or a tensor left on the device for DeviceLosses
        if self.teaching is None:
            loss, d_scores = self.tagger.loss(scores, gold, read=not on_device)
        else:
            loss, d_scores = self.teaching.loss(self.tagger, segments, scores, gold)
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

    def distill(
        self,
        teacher_pipe: Optional[TrainablePipe],
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
        temperature: float = 1.0,
        top_k: int = 0,
    ) -> Dict[str, float]:
        """Learn from a teacher pipe's soft targets alone, no gold (spaCy v4's
        `TrainablePipe.distill`): the teacher reads each example's reference doc,
        the student its predicted doc, both of one text and cut into the
        student's training windows, as a silver doc is in `update`.

        teacher_pipe (Optional[TrainablePipe]): A trained `flat_ner` with this
            component's labels.
        examples (Iterable[Example]): Distillation examples: the reference (teacher)
            and predicted (student) docs of each have the same text.
        drop (float): The dropout rate (unused: dropout comes from the model's config).
        sgd (Optional[Optimizer]): The optimizer; None only accumulates gradients.
        losses (Optional[Dict[str, float]]): The losses so far, updated under
            the component's name.
        temperature (float): Divides both CRFs' potentials (spaCy v4 passes it
            from the component's `component_cfg`, as `top_k`).
        top_k (int): 0: learn the teacher's tag marginals; k > 0: its k best paths.
        RETURNS (Dict[str, float]): The updated losses.
        """
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        if not isinstance(teacher_pipe, LearnsFromExamples):
            raise ValueError(f"'{self.name}' learns from a flat_ner teacher, not from {type(teacher_pipe).__name__}")
        check_labels(self.labels, teacher_pipe.labels)
        examples = list(examples)
        validate_examples(examples, "FlatNER.distill")
        for k, eg in enumerate(examples):
            if eg.reference.text != eg.predicted.text:
                raise ValueError(f"distillation example {k}: the reference and predicted docs differ in text")
        self._require_initialized()
        segments: List[Segment] = []
        taught: List[Segment] = []
        for eg in examples:
            for segment, _ in self.segmenter.training_segments(eg.predicted, []):
                segments.append(segment)
                taught.append(Segment(eg.reference, segment.start, segment.end, segment.text))
        if not any(len(s) for s in segments):
            return losses
        teacher_scores = teacher_pipe.soft_targets(taught, temperature=temperature, top_k=top_k)
        student_scores, backprop = self.model.begin_update(segments)
        loss, d_scores = self.get_teacher_student_loss(teacher_scores, student_scores, temperature=temperature)
        backprop(d_scores)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_teacher_student_loss(
        self, teacher_scores: Sequence[SoftTarget], student_scores: Floats3d, *, temperature: float = 1.0
    ) -> Tuple[float, Floats3d]:
        """The loss and its gradient of the student's scores relative to the
        teacher's (spaCy v4's `get_teacher_student_loss`), the soft loss of
        `Teaching` (`teaching.soft_loss`): the cross-entropy of the student CRF's
        marginals against the teacher's, or the weighted NLL of its best paths.

        teacher_scores (Sequence[SoftTarget]): Per row, the teacher's soft targets
            (its `soft_targets`).
        student_scores (Floats3d): The student's emission scores of the same rows.
        temperature (float): Divides the student CRF's potentials; the teacher's
            targets must come at the same temperature.
        RETURNS (Tuple[float, Floats3d]): The loss, averaged over non-empty rows, and the gradient.
        """
        return soft_loss(self.tagger, student_scores, list(teacher_scores), temperature)

    def soft_targets(
        self, segments: Sequence[Segment], *, temperature: float = 1.0, top_k: int = 0
    ) -> List[SoftTarget]:
        """This component's soft targets for a student, under its boundary rules.

        segments (Sequence[Segment]): The student's segments; their docs carry
            what this component's model reads (a transformer's output, say).
        temperature (float): Divides the CRF's potentials.
        top_k (int): 0: each character's tag marginals, (length, n_tags) float32;
            k > 0: the k best paths with their probabilities (`TopPaths`).
        RETURNS (List[SoftTarget]): Per segment, in this component's tag order.
        """
        self._require_initialized()
        lengths = [len(s) for s in segments]
        if not any(lengths):
            scores = self.model.ops.alloc3f(len(segments), 0, len(self.tag_set))
        else:
            scores = self.model.predict(list(segments))
        rules = self.boundary_rules
        forbidden = None
        if rules is not None and any(lengths):
            forbidden = rules.forbidden((s.text for s in segments), self.tag_set, scores.shape[1])
        if top_k:
            return list(self.tagger.top_paths(scores, lengths, forbidden, top_k, temperature))
        return list(self.tagger.marginals(scores, lengths, forbidden, temperature))
