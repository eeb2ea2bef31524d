"""The torch side: the taggers as plain PyTorch modules.

Embeddings, relative span positions, FLAT's, TENER's and DC-SAN's layers, the
encoder that stacks them into emission scores, and the constrained CRF with its
marginals, its K best paths and the distillation losses built on them. Modules
here import torch, NumPy, pytorch-crf and `spacy_flat.settings` only, never
spaCy or thinc, so the encoder can be used, exported or tested as plain PyTorch.
"""
