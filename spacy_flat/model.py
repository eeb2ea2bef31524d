"""The registered FLAT architecture: the one place where thinc meets PyTorch.

`docs -> FlatBatch` (featurizer, NumPy) `-> emissions` (PyTorch FlatTagger,
wrapped by thinc). The CRF lives inside the torch module; `crf_loss` and
`crf_decode` run it on the emissions thinc returns, so the thinc optimizer
trains encoder and CRF alike (PyTorchShim.finish_update walks every parameter).
"""

import io
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

import numpy
import torch
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, PyTorchGradScaler, chain, torch2xp, xp2torch
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import Floats2d, Floats3d, Ints1d

from .batching import budget_batches
from .char_vocab import CharVocab
from .encoder import FlatTagger
from .features import FlatBatch, featurize
from .lexicon import Lexicon
from .shim import InPlacePyTorchShim

InT = List[Doc]


def _single_threaded_torch_in_child() -> None:
    # A child forked after torch's OpenMP pool started (nlp.pipe(n_process=N))
    # deadlocks in its first parallel op; one thread per process avoids that
    # and is what N processes on shared cores want anyway.
    torch.set_num_threads(1)


os.register_at_fork(after_in_child=_single_threaded_torch_in_child)
OutT = Floats3d


@registry.architectures("spacy-flat.FlatTagger.v1")
def build_flat_tagger(
    width: int = 160,
    n_heads: int = 8,
    ffn_width: int = 480,
    n_layers: int = 1,
    char_width: int = 128,
    word_width: int = 64,
    word_rows: int = 20000,
    bigram_width: int = 0,
    bigram_rows: int = 0,
    bigram_vectors: bool = False,
    max_words: int = -1,
    embed_dropout: float = 0.5,
    dropout: float = 0.15,
    attention_dropout: float = 0.0,
    output_dropout: float = 0.3,
    scaled: bool = True,
    mask_self_matched: bool = False,
    max_distance: int = -1,
    head_only: bool = False,
    mixed_precision: bool = False,
    grad_scaler_config: Optional[Dict[str, Any]] = None,
) -> Model[InT, OutT]:
    """Build FLAT: lattice features, the FLAT encoder and emission scores.

    width (int): d_model (paper, Table 5: 160).
    n_heads (int): Attention heads (8). ffn_width (int): FFN size (480).
    n_layers (int): FLAT layers (1).
    char_width (int): Character embedding width; must match the character
        vectors given at initialization (jieba's LAC table: 128).
    word_width (int), word_rows (int): Word bloom-embedding width and rows.
    bigram_width (int), bigram_rows (int): Character-bigram embeddings; 0 rows for none.
    bigram_vectors (bool): Also give each character the lexicon's vector of its
        bigram (zeros where the lexicon has none), as the paper's pretrained
        bigram embeddings; needs a lexicon with vectors.
    max_words (int): Cap on lattice words per text; -1 for none.
    embed_dropout (float), dropout (float), attention_dropout (float),
    output_dropout (float): Dropout rates (paper: 0.5 embeddings, 0.3 output).
    scaled (bool): Scale attention by 1/sqrt(d_head); False is TENER's un-scaled attention.
    mask_self_matched (bool): FLAT_msm ablation. max_distance (int): FLAT_mld
        ablation (10 in the paper); -1 for none. head_only (bool): FLAT_head ablation.
    mixed_precision (bool), grad_scaler_config (dict): PyTorch autocast and grad scaling.
    RETURNS (Model[List[Doc], Floats3d]): Emission scores (batch, chars, tags).
    """
    module = FlatTagger(
        width=width,
        n_heads=n_heads,
        ffn_width=ffn_width,
        n_layers=n_layers,
        char_width=char_width,
        word_width=word_width,
        word_rows=word_rows,
        bigram_width=bigram_width,
        bigram_rows=bigram_rows,
        bigram_vectors=bigram_vectors,
        embed_dropout=embed_dropout,
        dropout=dropout,
        attention_dropout=attention_dropout,
        output_dropout=output_dropout,
        scaled=scaled,
        mask_self_matched=mask_self_matched,
        max_distance=max_distance,
        head_only=head_only,
    )
    features, tagger = _features_and_tagger(
        module, word_rows, bigram_rows, bigram_vectors, max_words, mixed_precision, grad_scaler_config
    )
    model: Model[InT, OutT] = chain(features, tagger)
    model.set_ref("features", features)
    model.set_ref("tagger", tagger)
    return model


@registry.architectures("spacy-flat.FlatTransformerTagger.v1")
def build_flat_transformer_tagger(
    tok2vec: Model[List[Doc], List[Floats2d]],
    use_char_embeddings: bool = True,
    learn_rate_scale: float = 5.0,
    width: int = 160,
    n_heads: int = 8,
    ffn_width: int = 480,
    n_layers: int = 1,
    char_width: int = 128,
    word_width: int = 64,
    word_rows: int = 20000,
    bigram_width: int = 0,
    bigram_rows: int = 0,
    bigram_vectors: bool = False,
    max_words: int = -1,
    embed_dropout: float = 0.5,
    dropout: float = 0.15,
    attention_dropout: float = 0.0,
    output_dropout: float = 0.3,
    scaled: bool = True,
    mask_self_matched: bool = False,
    max_distance: int = -1,
    head_only: bool = False,
    mixed_precision: bool = False,
    grad_scaler_config: Optional[Dict[str, Any]] = None,
) -> Model[InT, OutT]:
    """FLAT+BERT: FLAT whose character representations come from a transformer.

    tok2vec (Model[List[Doc], List[Floats2d]]): Token vectors, usually a
        `spacy-transformers.TransformerListener.v1` of a shared `transformer`
        component (which is then fine-tuned jointly, with its own optimizer settings).
        Each character takes the vector of the token it belongs to (one character
        per token in `spacy.blank("zh")`); whitespace between tokens gets zeros.
    use_char_embeddings (bool): Also use the character embeddings (concatenated).
    learn_rate_scale (float): FLAT's learning rate as a multiple of the optimizer's,
        which the transformer fine-tunes at (the paper uses a lower rate for BERT).
    Other settings: as `spacy-flat.FlatTagger.v1`.
    """
    module = FlatTagger(
        width=width,
        n_heads=n_heads,
        ffn_width=ffn_width,
        n_layers=n_layers,
        char_width=char_width,
        word_width=word_width,
        word_rows=word_rows,
        bigram_width=bigram_width,
        bigram_rows=bigram_rows,
        bigram_vectors=bigram_vectors,
        embed_dropout=embed_dropout,
        dropout=dropout,
        attention_dropout=attention_dropout,
        output_dropout=output_dropout,
        scaled=scaled,
        mask_self_matched=mask_self_matched,
        max_distance=max_distance,
        head_only=head_only,
        use_char_embeddings=use_char_embeddings,
    )
    features, tagger = _features_and_tagger(
        module,
        word_rows,
        bigram_rows,
        bigram_vectors,
        max_words,
        mixed_precision,
        grad_scaler_config,
        learn_rate_scale,
    )
    model: Model[InT, OutT] = Model(
        "flat_transformer",
        _transformer_forward,
        layers=[features, tok2vec, tagger],
        refs={"features": features, "tok2vec": tok2vec, "tagger": tagger},
        # Windows would cut docs away from their transformer output; the transformer
        # handles long docs with its own span getter.
        attrs={"whole_docs": True},
    )
    return model


def _features_and_tagger(
    module: FlatTagger,
    word_rows: int,
    bigram_rows: int,
    bigram_vectors: bool,
    max_words: int,
    mixed_precision: bool,
    grad_scaler_config: Optional[Dict[str, Any]],
    learn_rate_scale: float = 1.0,
) -> Tuple[Model[InT, FlatBatch], Model[FlatBatch, OutT]]:
    features: Model[InT, FlatBatch] = Model(
        "flat_features",
        _featurize_forward,
        attrs={
            "word_rows": word_rows,
            "bigram_rows": bigram_rows,
            "bigram_vectors": bigram_vectors,
            "max_words": max_words,
            "lexicon": None,
            "char_vocab": None,
        },
    )
    # PyTorchWrapper_v3's layer, with the in-place shim (see shim.py).
    shim = InPlacePyTorchShim(
        module,
        mixed_precision=mixed_precision,
        grad_scaler=PyTorchGradScaler(**(grad_scaler_config or {})),
        device=None,
        serialize_model=_serialize,
        deserialize_model=_deserialize,
        lr_scale=learn_rate_scale,
    )
    tagger: Model[FlatBatch, OutT] = Model(
        "pytorch",
        pytorch_forward,
        attrs={"convert_inputs": _convert_inputs, "convert_outputs": _convert_outputs},
        shims=[shim],
        dims={"nI": None, "nO": None},
    )
    return features, tagger


def _transformer_forward(model: Model[InT, OutT], docs: InT, is_train: bool) -> Tuple[OutT, Callable]:
    # The listener needs all docs at once, as the transformer saw them; FLAT then
    # runs on groups under the attention budget, since one padded batch of an
    # nlp.pipe batch with a 1,500-character doc in it takes tens of GB.
    features, tok2vec, tagger = (model.get_ref(name) for name in ("features", "tok2vec", "tagger"))
    tokvecs, backprop_tok2vec = tok2vec(docs, is_train)
    ops = model.ops
    # Row of each character's token among the stacked token vectors, shifted by
    # one: row 0 is a zero vector for whitespace outside every token.
    rows, offset = [], 0
    for doc in docs:
        token_rows = _char_token_rows(doc)
        rows.append(numpy.where(token_rows >= 0, token_rows + offset + 1, 0).astype("int32"))
        offset += len(doc)
    stacked = ops.xp.concatenate([ops.alloc2f(1, tokvecs[0].shape[1]), *tokvecs])
    groups = []
    for group in budget_batches([len(r) for r in rows]):
        batch, _ = features([docs[i] for i in group], is_train)
        index = ops.asarray1i(cast(Ints1d, numpy.concatenate([rows[i] for i in group])))
        batch.char_features = stacked[index]
        group_scores, backprop_group = tagger(batch, is_train)
        groups.append(
            (ops.asarray1i(cast(Ints1d, numpy.asarray(group, dtype="int32"))), index, group_scores, backprop_group)
        )
    n_chars = max(len(r) for r in rows)
    scores = ops.alloc3f(len(docs), n_chars, groups[0][2].shape[2])
    for where, _, group_scores, _ in groups:
        scores[where, : group_scores.shape[1]] = group_scores

    def backprop(d_scores: OutT) -> List[Doc]:
        d_stacked = ops.alloc2f(*stacked.shape)
        has_gradient = False
        for where, index, group_scores, backprop_group in groups:
            d_chars = backprop_group(ops.xp.ascontiguousarray(d_scores[where, : group_scores.shape[1]]))
            if d_chars is not None:
                ops.scatter_add(d_stacked, index, d_chars)
                has_gradient = True
        if has_gradient:
            sizes = [len(doc) for doc in docs]
            d_tokvecs = ops.xp.split(d_stacked[1:], numpy.cumsum(sizes)[:-1].tolist())
            backprop_tok2vec(list(d_tokvecs))
        return []

    return scores, backprop


def _char_token_rows(doc: Doc) -> numpy.ndarray:
    """Token index of each character of `doc.text`; -1 for trailing whitespace."""
    rows = numpy.full(len(doc.text), -1, dtype="int64")
    for token in doc:
        rows[token.idx : token.idx + len(token.text)] = token.i
    return rows


def torch_module(model: Model) -> FlatTagger:
    """RETURNS (FlatTagger): The torch module inside a FLAT model."""
    return model.get_ref("tagger").shims[0]._model


def set_resources(model: Model, lexicon: Lexicon, char_vocab: CharVocab) -> None:
    """Point the featurizer at the component's lexicon and character vocabulary.
    They are saved by the component, not inside the model's bytes."""
    features = model.get_ref("features")
    features.attrs["lexicon"] = lexicon
    features.attrs["char_vocab"] = char_vocab


def set_char_vectors(model: Model, table: numpy.ndarray) -> None:
    """Initialize the character embeddings from a (rows, char_width) table."""
    torch_module(model).set_char_vectors(torch.from_numpy(numpy.ascontiguousarray(table, dtype="float32")))


def _featurize_forward(model: Model[InT, FlatBatch], docs: InT, is_train: bool) -> Tuple[FlatBatch, Callable]:
    lexicon, char_vocab = model.attrs["lexicon"], model.attrs["char_vocab"]
    if lexicon is None or char_vocab is None:
        raise ValueError("The FLAT model has no lexicon: initialize the flat_ner component first")
    batch = featurize(
        [doc.text for doc in docs],
        lexicon,
        char_vocab,
        word_rows=model.attrs["word_rows"],
        bigram_rows=model.attrs["bigram_rows"],
        max_words=model.attrs["max_words"],
        # Absent from models built before the option existed.
        bigram_vectors=model.attrs.get("bigram_vectors", False),
    )
    return batch, lambda d_batch: []


def _device(model: Model) -> torch.device:
    return next(model.shims[0]._model.parameters()).device


def _convert_inputs(model: Model, batch: FlatBatch, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    device = _device(model)

    def tensor(array: Optional[numpy.ndarray]) -> Optional[torch.Tensor]:
        return None if array is None else torch.from_numpy(numpy.ascontiguousarray(array)).to(device)

    kwargs = {
        "char_rows": tensor(batch.char_rows),
        "word_hashes": tensor(batch.word_hashes),
        "heads": tensor(batch.heads),
        "tails": tensor(batch.tails),
        "char_index": tensor(batch.char_index),
        "word_index": tensor(batch.word_index),
        "token_mask": tensor(batch.token_mask),
        "char_mask": tensor(batch.char_mask),
        "bigram_hashes": tensor(batch.bigram_hashes),
        "word_vectors": tensor(batch.word_vectors),
        "bigram_vectors": tensor(batch.bigram_vectors),
    }
    if batch.char_features is not None:
        kwargs["char_features"] = xp2torch(batch.char_features, requires_grad=is_train, device=device)

    def backprop(d_inputs: ArgsKwargs) -> Optional[Floats2d]:
        """RETURNS: the gradient of the character features, if any."""
        grad = d_inputs.kwargs.get("char_features")
        return None if grad is None else cast(Floats2d, torch2xp(grad))

    return ArgsKwargs(args=(), kwargs=kwargs), backprop


def _convert_outputs(model: Model, inputs_outputs: Tuple[Any, torch.Tensor], is_train: bool) -> Tuple[OutT, Callable]:
    _, output = inputs_outputs
    scores = cast(OutT, torch2xp(output.float()))

    def backprop(d_scores: OutT) -> ArgsKwargs:
        return ArgsKwargs(args=(output,), kwargs={"grad_tensors": xp2torch(d_scores, device=output.device)})

    return scores, backprop


def _serialize(module: torch.nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)
    return buffer.getvalue()


def _deserialize(module: torch.nn.Module, data: bytes, device: torch.device) -> torch.nn.Module:
    # weights_only: a saved pipeline holds tensors, never code to unpickle.
    state = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
    module.load_state_dict(state)
    return module.to(device)


def _padded(lengths: Sequence[int], device: torch.device) -> torch.Tensor:
    width = max(lengths)
    return torch.arange(width, device=device)[None, :] < torch.as_tensor(list(lengths), device=device)[:, None]


def crf_loss(
    model: Model, scores: OutT, gold: Sequence[Sequence[int]], n_rows: Optional[int] = None
) -> Tuple[float, OutT]:
    """CRF negative log-likelihood, averaged over `n_rows` rows (default: this
    batch's), and its gradient.

    The CRF's own parameter gradients accumulate in the torch module and are
    applied by the next `finish_update`.
    """
    module = torch_module(model)
    device = next(module.parameters()).device
    emissions = xp2torch(scores, requires_grad=True, device=device)
    lengths = [len(g) for g in gold]
    mask = _padded(lengths, device)[:, : emissions.shape[1]]
    tags = torch.zeros(mask.shape, dtype=torch.long)
    for b, row in enumerate(gold):
        tags[b, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    loss = module.loss(emissions, tags.to(device), mask) / max(1, n_rows or len(gold))
    loss.backward()
    assert emissions.grad is not None
    return float(loss.item()), cast(OutT, torch2xp(emissions.grad))


def crf_decode(model: Model, scores: OutT, lengths: Sequence[int]) -> List[List[int]]:
    """Viterbi tag ids per row, each of its own length."""
    module = torch_module(model)
    device = next(module.parameters()).device
    emissions = xp2torch(scores, device=device)
    return module.decode(emissions, _padded(lengths, device)[:, : emissions.shape[1]])
