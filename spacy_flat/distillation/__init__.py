"""Learning from the models and raw text at hand: teachers that give soft
targets (one trained pipeline, or an ensemble whose members' tag marginals are
averaged), the cache that computes each text's targets once and the store that
keeps them on disk for resumed runs and other students, decoding an ensemble,
and silver sentences from raw text for self-training.

Modules here may import the component (`pipeline/`), the layers and the data
side, and `annotate/` and `vectors/` for reading raw text; only `cli/`
imports them.
"""
