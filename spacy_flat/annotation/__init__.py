"""Annotating a corpus: records in, entities out, in resumable shards."""
