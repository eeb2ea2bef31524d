"""The torch side: the tagger as plain PyTorch modules.

The tagger (`tagger.py`) composes the lattice's embeddings (`embeddings.py`), one encoder
(`lattice.py`'s `LatticeEncoder`: FLAT in `flat/`, TENER in `tener.py`, DC-SAN in `dcsan.py`,
the Lattice LSTM in `lattice_lstm/`) and the CRF head (`spacy_flat.crf`). Modules here import
torch, NumPy, the CRF and the package's base only, never spaCy or thinc, so the tagger can be
used, exported or tested as plain PyTorch.
"""
