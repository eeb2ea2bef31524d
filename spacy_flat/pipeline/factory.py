"""The registered `flat_ner` factory and its default config."""

from typing import Callable, List, Optional

from spacy.language import Language
from thinc.api import Model
from thinc.types import Floats3d

from ..lattice.windows import Segment
from .flat_ner import FlatNER


@Language.factory(
    "flat_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type", "doc.spans"],
    default_config={
        "model": {"@architectures": "spacy-flat.FlatTagger.v2"},
        "alignment_mode": "expand",
        "window_size": 512,
        "window_overlap": 32,
        "constrain_boundaries": True,
        "scores_key": "flat_ner",
        "threshold": 0.0,
        "decoding": "auto",
        "int8_inference": False,
        "normalize_script": False,
        "skip_spaces": False,
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
    constrain_boundaries: bool,
    scores_key: Optional[str],
    threshold: float,
    decoding: str,
    int8_inference: bool,
    normalize_script: bool,
    skip_spaces: bool,
    scorer: Optional[Callable],
) -> FlatNER:
    """Create a FLAT named-entity recognizer.

    model (Model[List[Segment], Floats3d]): A registered architecture's model (FLAT, TENER,
        DC-SAN, the Lattice LSTM, with or without a transformer).
    alignment_mode (str): How predicted character spans snap to tokens when the
        tokenizer's tokens are longer than characters: "strict", "contract" or "expand".
    window_size (int): Longest text encoded at once; longer docs are cut into
        windows at sentence punctuation. <= 0 never cuts.
    window_overlap (int): Context characters shared by neighbouring windows.
    constrain_boundaries (bool): Learn from the training entities where entities
        may not reach (line breaks, sentence ends, punctuation; `boundaries.py`)
        and decode under those constraints.
    scores_key (Optional[str]): Put each entity's probability (the CRF's marginal
        of its exact tag run) in `doc.spans[scores_key].attrs["scores"]`, aligned
        with `doc.ents`; None computes none.
    threshold (float): Keep only entities with at least this probability (0: all);
        trades recall for precision without retraining. Needs `scores_key`.
    decoding (str): Where Viterbi, the entity runs and their probabilities are computed:
        "torch" on the model's device (batched, one copy of the entities per batch), "numpy"
        on the host, "auto" torch on a GPU and NumPy on a CPU, where it is faster.
    int8_inference (bool): Predict on a CPU with the tagger's linear layers dynamically
        quantized to int8 (`nn/quantized.py`): faster, at a small cost in F1; training, and
        prediction on a GPU, stay float32.
    normalize_script (bool): Read traditional characters as their simplified forms, one for
        one (OpenCC's character table; pip install 'spacy-flat[scripts]'), so a model trained
        on simplified text reads traditional text too; `doc.text` and the entities' offsets
        are the text's own. Changes three characters of MSRA's training text: it can be turned
        on after training.
    skip_spaces (bool): Read past the runs of spaces (and tabs, no-break and ideographic spaces)
        beside a Chinese character, as in word-segmented or typed text (马云 在 杭州), which the
        training corpora lack; an entity may then cover such a space. Spaces between Latin words
        and every line break stay. `doc.text` and the entities' offsets are the text's own.
    scorer (Optional[Callable]): The scoring method; the default matches entities by exact
        character span and label, whatever the tokenization.
    """
    return FlatNER(
        nlp.vocab,
        model,
        name,
        alignment_mode=alignment_mode,
        window_size=window_size,
        window_overlap=window_overlap,
        constrain_boundaries=constrain_boundaries,
        scores_key=scores_key,
        threshold=threshold,
        decoding=decoding,
        int8_inference=int8_inference,
        normalize_script=normalize_script,
        skip_spaces=skip_spaces,
        scorer=scorer,
    )
