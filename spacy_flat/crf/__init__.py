"""The CRF head and its decoding, in one place: the constrained CRF and its loss (`model.py`,
`likelihood.py`), and decoding into entity runs with their probabilities, on the scores' device in
torch (`device_decoding.py`) or on the host in NumPy (`host_viterbi.py`, `host_marginals.py`,
`host_spans.py`, `host_runs.py`).

The `host_*` modules import NumPy only (no torch); the others torch, never spaCy or thinc.
"""
