"""From tag scores to entities, without torch.

The BILUO tag set, the boundary rules that constrain Viterbi, character spans
written to `doc.ents`, and the calibration of entity probabilities. Modules here
import NumPy and spaCy, and from the package only `errors`, `types` and each
other; never torch or thinc.
"""
