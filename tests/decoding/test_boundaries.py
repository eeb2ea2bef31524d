"""Entity boundaries a reader expects (boundaries.py): rules learned from the
training entities, enforced as constraints of CRF decoding."""

import pickle

import numpy
import pytest
import spacy
from spacy.training import Example
from spacy.util import fix_random_seed

from spacy_flat.decoding.boundaries import LINE_BREAK, SENTENCE_END, SPACE, SYMBOL, WORD, BoundaryRules, char_class
from spacy_flat.decoding.tags import TagSet

from ..util import small_config, small_lexicon, tiny_examples

TAGS = TagSet(["ORG", "PER"])

# Hostile texts and what no entity predicted on them may contain.
HOSTILE = [
    "重庆人和药店的老板张三在上海。",
    "重庆人和药店的老板张三在上海。" * 3,
    "张三\n\n李四",
    "张伟毕业于北京大学。李娜在上海工作。\n王芳加入了华为公司。",
    "😀" * 120,
    "Hello World from OpenAI and Google, a sentence in ASCII only.",
    "。，！？、；：“”（）《》…—",
]


def entity_ok(text: str) -> bool:
    """No line break, space or sentence end inside; not punctuation and symbols only."""
    kinds = {char_class(c) for c in text}
    return not kinds & {LINE_BREAK, SPACE, SENTENCE_END} and WORD in kinds


def test_char_classes():
    assert [char_class(c) for c in "张\n \u3000。!？，😀《A1"] == [
        WORD,
        LINE_BREAK,
        SPACE,
        SPACE,
        SENTENCE_END,
        SENTENCE_END,
        SENTENCE_END,
        SYMBOL,
        SYMBOL,
        SYMBOL,
        WORD,
        WORD,
    ]


def test_rules_are_counted_from_the_training_entities():
    rules = BoundaryRules.learn(["北京大学", "《人民日报》", "Yahoo!", "New York", "你好！世界", ""])
    # "Yahoo!" only ends on a "!": it allows entities to end there, not sentence ends inside them.
    assert not rules.line_break_inside and rules.space_inside and rules.sentence_end_inside
    assert rules.symbol_starts == "《" and rules.symbol_ends == "!》"
    assert rules.counts == {"entities": 5, "with_line_break": 0, "with_space": 1, "with_sentence_end": 1}
    assert not BoundaryRules.learn(["Yahoo!"]).sentence_end_inside
    assert any("0 of 5 training entities contain a line break: entities may not" in line for line in rules.describe())
    assert BoundaryRules.from_dict(rules.to_dict()) == rules


def test_forbidden_tags_per_character():
    rules = BoundaryRules.learn(["北京大学", "New York"])
    text = "张\n。 《😀"
    forbidden = rules.forbidden([text, "张"], TAGS, width=8)
    assert forbidden.shape == (2, 8, len(TAGS))
    assert not forbidden[:, :, 0].any()  # O is always allowed
    row = {tag: forbidden[0, :, i] for i, tag in enumerate(TAGS.tags)}
    assert not any(row[t][0] for t in TAGS.tags)  # a word character takes any tag
    assert all(row[t][1] for t in TAGS.tags[1:])  # the line break: no entity tag
    assert all(row[t][2] for t in TAGS.tags[1:])  # 。: no entity tag (no training entity has one)
    assert [row[f"{p}-ORG"][3] for p in "BILU"] == [True, False, True, True]  # a space only inside
    assert [row[f"{p}-ORG"][4] for p in "BILU"] == [True, False, True, True]  # 《 never began an entity
    assert not forbidden[0, len(text) :].any() and not forbidden[1].any()


def test_an_entity_may_end_on_a_sentence_end_its_data_ended_on():
    rules = BoundaryRules.learn(["Yahoo!"])
    forbidden = rules.forbidden(["o!"], TAGS, width=2)[0]
    index = TAGS.index
    assert not forbidden[1, index["L-ORG"]]
    assert forbidden[1, index["I-ORG"]] and forbidden[1, index["B-ORG"]] and forbidden[1, index["U-ORG"]]


def test_allowed_where_the_training_data_had_one():
    rules = BoundaryRules.learn(["北京\n大学", "《人民日报》"])
    forbidden = rules.forbidden(["\n《》"], TAGS, width=3)[0]
    index = TAGS.index
    assert not forbidden[0, index["I-ORG"]] and forbidden[0, index["B-ORG"]]
    assert not forbidden[1, index["B-ORG"]] and forbidden[1, index["L-ORG"]] and forbidden[1, index["U-ORG"]]
    assert not forbidden[2, index["L-ORG"]] and forbidden[2, index["B-ORG"]]


def test_decoding_finds_the_best_path_under_the_constraints(trained_nlp):
    """Scores that want one ORG across 。 decode as two entities, not one cut afterwards."""
    tagger = trained_nlp.get_pipe("flat_ner").tagger
    tags = trained_nlp.get_pipe("flat_ner")._tag_set
    text = "上海。重庆"
    scores = numpy.full((1, len(text), len(tags)), -5.0, dtype="float32")
    for position, tag in enumerate(["B-ORG", "I-ORG", "I-ORG", "I-ORG", "L-ORG"]):
        scores[0, position, tags.index[tag]] = 10.0
    scores[0, 1, tags.index["L-ORG"]] = scores[0, 3, tags.index["B-ORG"]] = 6.0  # second best: two ORGs
    scores[0, :, tags.index["O"]] = 0.0
    free = tags.decode(tagger.decode(scores, [len(text)])[0])
    assert free == [(0, 5, "ORG")]
    rules = BoundaryRules.learn(["北京大学"])
    forbidden = rules.forbidden([text], tags, len(text))
    constrained = tags.decode(tagger.decode(scores, [len(text)], forbidden)[0])
    assert constrained and all("。" not in text[a:b] for a, b, _ in constrained)
    assert constrained == [(0, 2, "ORG"), (3, 5, "ORG")]


def test_hostile_input_gives_no_entity_a_reader_would_reject(trained_nlp):
    ner = trained_nlp.get_pipe("flat_ner")
    assert ner.boundary_rules is not None and not ner.boundary_rules.sentence_end_inside
    for doc in trained_nlp.pipe(HOSTILE):
        assert all(entity_ok(ent.text) for ent in doc.ents), [(e.text, e.label_) for e in doc.ents]


def test_constraints_hold_in_windows_under_pipe_and_after_saving(trained_nlp, tmp_path):
    nlp = pickle.loads(pickle.dumps(trained_nlp))
    ner = nlp.get_pipe("flat_ner")
    texts = [HOSTILE[2] * 4, HOSTILE[0], "张三\n李四在北京大学。"]
    ner.cfg["window_size"] = 24
    ner.cfg["window_overlap"] = 4
    one_by_one = [[(e.start_char, e.end_char, e.label_) for e in nlp(t).ents] for t in texts]
    piped = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in nlp.pipe(texts, batch_size=2)]
    assert piped == one_by_one
    assert all(entity_ok(texts[i][a:b]) for i, doc in enumerate(one_by_one) for a, b, _ in doc)
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    # Window settings come from the config, not from what was changed at run time.
    assert loaded.get_pipe("flat_ner").cfg["window_size"] == 512
    loaded.get_pipe("flat_ner").cfg.update(window_size=24, window_overlap=4)
    assert loaded.get_pipe("flat_ner").boundary_rules == ner.boundary_rules
    assert [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in loaded.pipe(texts)] == one_by_one


def test_switched_off_in_the_config():
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config={**small_config(), "constrain_boundaries": False})
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    assert ner.cfg["boundaries"] is None and ner.boundary_rules is None


@pytest.mark.parametrize("inside", ["。", "\n"])
def test_a_tiny_pipeline_keeps_entities_across_what_its_data_had(inside):
    """Trained on ORGs that contain 。 (or a line break), it may predict such ORGs."""
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=small_config())
    texts = [f"他在北京{inside}大学工作。", f"她去了上海{inside}公司。", f"我在广州{inside}学院读书。"]
    orgs = [(2, 7), (3, 8), (2, 7)]
    examples = [
        Example.from_dict(nlp.make_doc(t), {"entities": [(a, b, "ORG")]}) for t, (a, b) in zip(texts, orgs)
    ] + tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    rules = ner.boundary_rules
    assert rules is not None
    assert (rules.sentence_end_inside if inside == "。" else rules.line_break_inside) is True
    optimizer = nlp.create_optimizer()
    for _ in range(120):
        nlp.update(examples, sgd=optimizer)
    found = [(e.start_char, e.end_char) for e in nlp(texts[0]).ents]
    assert orgs[0] in found


def test_evaluate_can_score_without_the_rules(trained_nlp, tmp_path, monkeypatch):
    from spacy.tokens import DocBin

    from spacy_flat.cli.main import main

    trained_nlp.to_disk(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in tiny_examples(trained_nlp)]).to_disk(tmp_path / "test.spacy")
    # Count the decodes that the rules constrain: every one with them, none without.
    constrained = []
    forbidden = BoundaryRules.forbidden

    def counted(self, *args, **kwargs):
        constrained.append(1)
        return forbidden(self, *args, **kwargs)

    monkeypatch.setattr(BoundaryRules, "forbidden", counted)
    calls = {}
    for flag, out in (([], "on"), (["--no-boundary-rules"], "off")):
        constrained.clear()
        assert (
            main(["evaluate", str(tmp_path / "model"), str(tmp_path / "test.spacy"), str(tmp_path / out), *flag]) == 0
        )
        assert (tmp_path / out / "scores.json").exists()
        calls[out] = len(constrained)
    assert calls["on"] > 0 and calls["off"] == 0
