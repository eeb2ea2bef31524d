"""BILUO tags over characters (tags.py): spans to tags and back."""

from spacy_flat.decoding.tags import TagSet


def test_encode_decode_round_trip():
    tags = TagSet(["PER", "LOC"])
    spans = [(0, 2, "PER"), (2, 3, "LOC"), (5, 9, "LOC")]
    ids = tags.encode(spans, 10)
    assert [tags.tags[i] for i in ids][:4] == ["B-PER", "L-PER", "U-LOC", "O"]
    assert tags.decode(ids) == spans
