"""Encoding segments in groups under the attention budget: the one place a
batch of segments is split, for both architectures, in training and prediction."""

from typing import Callable, List, Tuple

from thinc.api import CupyOps, Model, Ops
from thinc.types import Floats3d, Ints1d

from ..lattice.batching import (
    DEVICE_MAX_BATCH,
    DEVICE_PAIR_BUDGET,
    MAX_BATCH,
    PADDING_SLACK,
    PAIR_BUDGET,
    budget_batches,
)
from ..lattice.windows import Segment
from .featurizer import SegmentGradients


def flat_model(features: Model, tagger: Model) -> Model[List[Segment], Floats3d]:
    """FLAT on segments: lattice features, then the torch tagger, a group at a time.

    RETURNS (Model[List[Segment], Floats3d]): Emissions (segments, chars, tags).
    """
    return Model(
        "flat",
        _forward,
        layers=[features, tagger],
        refs={"features": features, "tagger": tagger},
    )


def _forward(
    model: Model[List[Segment], Floats3d], segments: List[Segment], is_train: bool
) -> Tuple[Floats3d, Callable]:
    scores, backprop = encode_in_groups(model, segments, is_train)

    def backprop_segments(d_scores: Floats3d) -> List[Segment]:
        backprop(d_scores)
        return []

    return scores, backprop_segments


def encode_in_groups(
    model: Model, segments: List[Segment], is_train: bool
) -> Tuple[Floats3d, Callable[[Floats3d], SegmentGradients]]:
    """Run `model`'s "features" and "tagger" refs over groups of segments whose
    attention cost stays under a budget (`group_lengths`), and gather the
    emissions into one (segments, longest, tags) array in segment order.

    In training with several groups, each group's attention is recomputed in
    backward rather than kept, so memory stays at one group's whatever the
    number of windows; with one group (nearly every training batch) nothing changes.
    In prediction on the CPU, groups also keep padding small (`PADDING_SLACK`);
    on a GPU a batch is one group where it fits (`groups_for_device`).

    RETURNS: The emissions, and a backprop that returns each segment's feature gradient.
    """
    features, tagger = model.get_ref("features"), model.get_ref("tagger")
    ops = model.ops
    # Empty segments (empty docs) are not encoded; their rows stay zero-length.
    filled = [i for i, segment in enumerate(segments) if len(segment)]
    lengths = [len(segments[i]) for i in filled]
    groups = [[filled[k] for k in group] for group in group_lengths(lengths, is_train, groups_for_device(ops))]
    done = []
    for group in groups:
        batch, backprop_features = features([segments[i] for i in group], is_train)
        batch.recompute = is_train and len(groups) > 1
        group_scores, backprop_tagger = tagger(batch, is_train)
        done.append((group, group_scores, backprop_features, backprop_tagger))
    longest = max((len(segment) for segment in segments), default=0)
    n_tags = done[0][1].shape[2] if done else 0
    scores = ops.alloc3f(len(segments), longest, n_tags)
    for group, group_scores, _, _ in done:
        scores[_rows(ops, group), : group_scores.shape[1]] = group_scores

    def backprop(d_scores: Floats3d) -> SegmentGradients:
        gradients: SegmentGradients = [None] * len(segments)
        for group, group_scores, backprop_features, backprop_tagger in done:
            d_group = ops.xp.ascontiguousarray(d_scores[_rows(ops, group), : group_scores.shape[1]])
            for i, d_features in zip(group, backprop_features(backprop_tagger(d_group))):
                gradients[i] = d_features
        return gradients

    return scores, backprop


def groups_for_device(ops: Ops) -> bool:
    """Whether to group for a CUDA device (thinc's CupyOps) rather than a CPU; Apple's
    MPSOps, a NumpyOps, keeps the CPU's grouping (not measured there)."""
    return isinstance(ops, CupyOps)


def group_lengths(lengths: List[int], is_train: bool, on_device: bool) -> List[List[int]]:
    """Indices into `lengths` grouped for one encoder call each.

    Training keeps its batches whole under the attention budget (more groups
    would mean recomputed attention). Prediction on the CPU also caps padding
    (`PADDING_SLACK`), since a CPU pays for every padded pair; on a device it
    takes the largest groups that fit (`DEVICE_PAIR_BUDGET`, `DEVICE_MAX_BATCH`).
    """
    if is_train:
        return list(budget_batches(lengths, pair_budget=PAIR_BUDGET, max_batch=MAX_BATCH))
    if on_device:
        return list(budget_batches(lengths, pair_budget=DEVICE_PAIR_BUDGET, max_batch=DEVICE_MAX_BATCH))
    return list(budget_batches(lengths, pair_budget=PAIR_BUDGET, max_batch=MAX_BATCH, padding_slack=PADDING_SLACK))


def _rows(ops: Ops, group: List[int]) -> Ints1d:
    return ops.asarray1i(group)
