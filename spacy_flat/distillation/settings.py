"""Settings of distillation and self-training, importable without loading a pipeline."""

from dataclasses import dataclass


@dataclass
class SilverSettings:
    """Which sentences a teacher's annotation keeps.

    min_probability (float): Every entity's confidence (the least marginal of
        its tags) must reach this.
    empty_share (float): Share of the sure sentences without entities that are
        kept (chosen by a hash of the text, so a re-run keeps the same ones).
    max_sentences (int): Stop after this many kept sentences; 0 for no limit.
    min_han (int): Shorter sentences (in Han characters) are not read.
    max_length (int): Longer sentences (in characters) are passed over.
    batch_size (int): Sentences the teacher scores at once.
    """

    min_probability: float = 0.9
    empty_share: float = 0.2
    max_sentences: int = 0
    min_han: int = 4
    max_length: int = 200
    batch_size: int = 64
