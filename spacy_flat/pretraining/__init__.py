"""Pretraining inputs from raw text: reading corpora, cleaning, and the sentence filter."""
