"""The `flat_ner` component and what builds it.

The registered factory, the component (`flat_ner.py`: labels, initialization,
prediction on segments, learning, saving and loading), entity probabilities, the
registered architectures and the scorer. Modules here import the thinc layers,
the data side and the decoding, and reach the tagger through `layers.TorchTagger`;
only `architectures.py`, which composes the torch modules, imports `nn/` and torch.
"""
