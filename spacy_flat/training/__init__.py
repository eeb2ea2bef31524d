"""Training that survives being stopped: `python -m spacy_flat train` runs spaCy's training loop
(its config, `[training]` block, loggers and stopping rules) and writes checkpoints that hold everything
the run needs to go on as if it had never stopped: the pipeline's weights, the optimizer's moments and
averages, the step, the position in the batch stream, the scores so far with `model-best`, and every
random state. `checkpoints.py` writes them atomically and loads only complete, verified ones;
`fingerprint.py` refuses to resume a run whose config, data or library versions changed; `randomness.py`,
`optimizer_state.py` and `batches.py` capture and restore the parts spaCy keeps no handle on; `loop.py`
drives the run; `schedules.py` holds the configs' learning-rate schedule.

Modules here may import anything in the package except `cli/`.
"""
