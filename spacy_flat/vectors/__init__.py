"""Pretrained input tables from raw text (`pretrain-vectors`): reading corpora, cleaning, the sentence
filter, and the staged word2vec training of the character, bigram and word tables.

Modules here import each other and gensim (an extra); nothing below `cli/`
imports them.
"""
