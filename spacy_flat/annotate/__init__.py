"""Annotating a corpus: records in, entities out, in resumable shards, on one
machine or on Ray.

Modules here import the package's `errors` and load pipelines through spaCy;
nothing below `cli/` imports them.
"""
