"""The `flat_ner` component and what builds it.

The registered factory, the component (labels, initialization, training and
prediction on segments), saving and loading, entity probabilities, the
registered architectures and the scorer. Modules here import the thinc layers,
the data side and the decoding; never torch or a module of `nn/` directly: they
reach the tagger through `layers.TorchTagger`.
"""
