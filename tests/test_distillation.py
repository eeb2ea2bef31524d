"""Teachers, ensembles, the target cache, posterior decoding and a tiny teacher -> student round trip."""

import itertools

import numpy
import pytest
import spacy
from spacy.training import Example
from spacy.util import fix_random_seed

from spacy_flat.decoding.posterior import posterior_decode
from spacy_flat.decoding.tags import TagSet
from spacy_flat.distillation.settings import DistillationSettings
from spacy_flat.distillation.store import TargetStore, store_source
from spacy_flat.distillation.teachers import CachedTargets, EnsembleTeacher, PipelineTeacher, ensemble_entities
from spacy_flat.pipeline.teaching import SILVER, Teaching

from .conftest import build_family, build_small, small_config, small_lexicon, tiny_examples


@pytest.fixture(scope="module")
def teachers():
    return build_small(steps=60, seed=0), build_family("tener", steps=60, seed=1)


def entities(doc):
    return {(e.start_char, e.end_char, e.label_) for e in doc.ents}


def segments_of(nlp, texts):
    ner = nlp.get_pipe("flat_ner")
    segments, _ = ner.segmenter.segments([nlp.make_doc(t) for t in texts])
    return segments


def test_teacher_marginals_are_distributions_and_match_decoding(teachers):
    flat, _ = teachers
    texts = [eg.reference.text for eg in tiny_examples(flat)]
    rows = PipelineTeacher(flat).targets(segments_of(flat, texts))
    assert [len(r) for r in rows] == [len(t) for t in texts]
    for row in rows:
        assert numpy.allclose(row.sum(1), 1.0, atol=1e-5)
    # The per-character most probable tags agree with Viterbi on a confident model for most characters.
    ner = flat.get_pipe("flat_ner")
    docs = [flat(t) for t in texts]
    predicted = {(d.text, e.start_char, e.end_char, e.label_) for d in docs for e in d.ents}
    decoded = ensemble_entities(PipelineTeacher(flat), ner, [flat.make_doc(t) for t in texts])
    from_marginals = {(t, s, e, lab) for t, spans in zip(texts, decoded) for s, e, lab, _ in spans}
    assert all(0.0 < p <= 1.0 for spans in decoded for *_, p in spans)
    assert predicted and len(predicted & from_marginals) >= 0.8 * len(predicted)


def test_ensemble_marginals_are_the_mean_of_the_members(teachers):
    flat, tener = teachers
    texts = ["北京大学的张三在上海工作。", "李四去了南京。"]
    segments = segments_of(flat, texts)
    members = [PipelineTeacher(flat), PipelineTeacher(tener)]
    ensemble = EnsembleTeacher(members).targets(segments)
    for k, row in enumerate(ensemble):
        want = (members[0].targets(segments)[k] + members[1].targets(segments)[k]) / 2
        assert numpy.allclose(row, want, atol=1e-6)
        assert numpy.allclose(row.sum(1), 1.0, atol=1e-5)


def test_teachers_with_other_labels_are_refused(teachers):
    flat, _ = teachers
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=small_config())
    examples = tiny_examples(nlp)[:2]
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon(), labels=["PER"])
    with pytest.raises(ValueError, match="same labels"):
        EnsembleTeacher([PipelineTeacher(flat), PipelineTeacher(nlp)])


def test_cache_computes_each_segment_once(teachers):
    flat, _ = teachers
    cache = CachedTargets(PipelineTeacher(flat))
    segments = segments_of(flat, ["北京大学的张三在上海工作。", "李四去了南京。", "北京大学的张三在上海工作。"])
    first = cache.targets(segments)
    again = cache.targets(segments[:2])
    assert cache.computed == 2 and cache.reused == 3
    assert numpy.allclose(first[0], first[2]) and numpy.allclose(again[1], first[1], atol=1e-3)


def test_posterior_decode_is_the_best_valid_path():
    tags = TagSet(["LOC"])
    allowed = set(tags.allowed_transitions())
    rng = numpy.random.default_rng(0)
    for _ in range(20):
        marginals = rng.dirichlet(numpy.ones(len(tags)), size=4)
        forbidden = rng.random((4, len(tags))) < 0.2
        forbidden[:, 0] = False
        best, best_path = -numpy.inf, None
        for path in itertools.product(range(len(tags)), repeat=4):
            valid = path[0] in tags.allowed_starts() and path[-1] in tags.allowed_ends()
            valid = valid and all((a, b) in allowed for a, b in zip(path, path[1:]))
            valid = valid and not any(forbidden[t, y] for t, y in enumerate(path))
            score = sum(numpy.log(marginals[t, y]) for t, y in enumerate(path))
            if valid and score > best:
                best, best_path = score, list(path)
        assert posterior_decode(marginals, tags, forbidden) == best_path


def test_student_learns_from_the_teacher_alone_on_silver_docs(teachers):
    flat, _ = teachers
    fix_random_seed(3)
    nlp = spacy.blank("zh")
    student = nlp.add_pipe("flat_ner", config=small_config())
    gold = tiny_examples(nlp)
    student.initialize(lambda: gold, nlp=nlp, lexicon=small_lexicon())
    cache = CachedTargets(PipelineTeacher(flat))
    student.teaching = Teaching(cache, weight=0.5)
    # Silver docs: the gold texts without their entities, marked as raw text.
    silver = []
    for eg in gold:
        doc = nlp.make_doc(eg.reference.text)
        doc.user_data[SILVER] = True
        silver.append(Example(nlp.make_doc(doc.text), doc))
    teacher_docs = [flat(eg.reference.text) for eg in gold]
    optimizer = nlp.create_optimizer()
    losses = []
    for _ in range(80):
        losses.append(nlp.update(silver, sgd=optimizer)["flat_ner"])
    assert losses[-1] < losses[0] / 2
    # The cache ran the teacher once per text.
    assert cache.computed == len(silver) and cache.reused == 79 * len(silver)
    student.teaching = None
    agree = sum(
        {(e.start_char, e.end_char, e.label_) for e in nlp(d.text).ents}
        == {(e.start_char, e.end_char, e.label_) for e in d.ents}
        for d in teacher_docs
    )
    assert agree >= 0.7 * len(teacher_docs)


def test_soft_weight_zero_is_plain_gold_training(teachers):
    flat, _ = teachers

    def run(teaching):
        fix_random_seed(5)
        nlp = spacy.blank("zh")
        ner = nlp.add_pipe("flat_ner", config=small_config())
        examples = tiny_examples(nlp)
        ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
        ner.teaching = teaching
        optimizer = nlp.create_optimizer()
        return [nlp.update(examples, sgd=optimizer)["flat_ner"] for _ in range(3)]

    plain = run(None)
    with_teacher = run(Teaching(PipelineTeacher(flat), weight=0.0))
    assert with_teacher == pytest.approx(plain, rel=1e-6)
    assert run(Teaching(PipelineTeacher(flat), weight=0.5)) != pytest.approx(plain, rel=1e-3)


def test_silver_command_keeps_sure_sentences_never_a_held_back_one(teachers, tmp_path):
    import json

    from spacy.tokens import DocBin

    from spacy_flat.cli.main import main
    from spacy_flat.pipeline.teaching import is_silver

    flat, _ = teachers
    flat.to_disk(tmp_path / "teacher")
    held = "张三在上海工作。"
    dev = DocBin(docs=[flat.make_doc(held)])
    dev.to_disk(tmp_path / "dev.spacy")
    lines = [
        {"text": "北京大学的李四去了南京。张三在上海工作。"},
        {"text": "北京大学的李四去了南京。"},  # a duplicate sentence
        {"content": "no text field here"},
        {"text": "今天天气很好，我们去公园散步。太短。"},
    ]
    raw = tmp_path / "raw.jsonl"
    raw.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in lines) + "\n{broken\n", encoding="utf8")
    out = tmp_path / "silver.spacy"
    args = ["silver", str(tmp_path / "teacher"), "--input", str(raw), "--output", str(out)]
    args += ["--held-back", str(tmp_path / "dev.spacy"), "--min-probability", "0.0", "--empty-share", "1.0"]
    assert main([*args, "--no-progress"]) == 0
    docs = list(DocBin().from_disk(out).get_docs(flat.vocab))
    report = json.loads(out.with_suffix(".json").read_text(encoding="utf8"))
    texts = [d.text for d in docs]
    assert held not in texts and len(texts) == len(set(texts)) == report["kept"] == 2
    assert all(is_silver(d) for d in docs)
    assert report["dropped"]["held back (in a dev or test set)"] == 1 and report["dropped"]["duplicate"] == 1
    assert sum(report["skipped_records"].values()) == 2  # the record without text and the broken line
    assert report["sentences"] == report["kept"] + sum(report["dropped"].values())
    # Sure only: a threshold above every entity's confidence keeps only sentences without entities.
    assert main([*args[:-4], "--min-probability", "1.01", "--empty-share", "1.0", "--no-progress"]) == 0
    assert all(not d.ents for d in DocBin().from_disk(out).get_docs(flat.vocab))


@pytest.mark.parametrize("cap", ["max_sentences", "max_with_entities"])
def test_silver_caps_count_all_kept_sentences_or_those_with_entities(cap, monkeypatch):
    """Out of domain most sure sentences are empty: a cap on all kept sentences fills with them, a
    cap on those with entities keeps as many sentences with entities whatever the empty ones."""
    from types import SimpleNamespace

    import spacy_flat.distillation.silver as silver_module
    from spacy_flat.distillation.settings import SilverSettings
    from spacy_flat.vectors.sentences import SentenceFilter

    def entities(teacher, reference, docs):  # a sure PER wherever 张三 is named
        return [[(0, 2, "PER", 0.99)] if doc.text.startswith("张三") else [] for doc in docs]

    monkeypatch.setattr(silver_module, "ensemble_entities", entities)
    teacher = SimpleNamespace(nlp=spacy.blank("zh"), component=None)
    # Three empty sentences to every one with an entity.
    texts = [f"张三第{i}次来到这里。" if i % 4 == 3 else f"今天第{i}次下雨了。" for i in range(80)]
    settings = SilverSettings(empty_share=1.0, batch_size=8, **{cap: 5})
    report = silver_module.SilverReport()
    docs = list(silver_module.silver_docs(teacher, texts, SentenceFilter(), settings, report))
    with_entities = [d for d in docs if d.ents]
    assert report.kept == len(docs) and report.kept_without_entities == len(docs) - len(with_entities)
    if cap == "max_sentences":
        assert len(docs) == 5 and len(with_entities) == 1
    else:
        assert len(with_entities) == 5 and len(docs) == 20
    summary = report.summary(SentenceFilter())
    assert summary["dropped"]["read after the cap (max_sentences or max_with_entities) was reached"] > 0


def test_gold_and_silver_corpus_takes_silver_in_the_ratio(tmp_path):
    from spacy.tokens import DocBin
    from spacy.util import registry

    from spacy_flat.errors import FlatError
    from spacy_flat.pipeline.teaching import is_silver

    nlp = spacy.blank("zh")
    gold = [eg.reference for eg in tiny_examples(nlp)]
    DocBin(docs=gold).to_disk(tmp_path / "gold.spacy")
    silver = []
    for k in range(30):
        doc = nlp.make_doc(f"第{k}句话在北京。")
        doc.user_data[SILVER] = True
        silver.append(doc)
    DocBin(docs=silver, store_user_data=True).to_disk(tmp_path / "silver.spacy")
    DocBin(docs=silver[:3]).to_disk(tmp_path / "unmarked.spacy")
    reader = registry.readers.get("spacy-flat.gold_and_silver.v1")
    examples = list(reader(tmp_path / "gold.spacy", tmp_path / "silver.spacy", silver_ratio=1.5)(nlp))
    marked = [is_silver(eg.reference) for eg in examples]
    assert marked == [False] * len(gold) + [True] * 15
    assert [eg.reference.text for eg in examples[len(gold) :]] == [d.text for d in silver[:15]]
    assert len(list(reader(tmp_path / "gold.spacy")(nlp))) == len(gold)
    with pytest.raises(FlatError, match=r"unmarked\.spacy: doc 0 is not marked silver"):
        list(reader(tmp_path / "gold.spacy", tmp_path / "unmarked.spacy")(nlp))


def student_setup(flat, tmp_path):
    """The tiny corpus, a word list and a character table; a student config (resume.cfg) with a
    [flat_distillation] block; the teacher saved. RETURNS: (config, data folder, teacher path)."""
    import io

    from spacy_flat.cli.convert import convert

    from .conftest import ROOT, TINY

    flat.to_disk(tmp_path / "teacher")
    data = tmp_path / "data"
    data.mkdir()
    convert(TINY, data / "train.spacy", log=io.StringIO())
    (data / "words.txt").write_text("北京大学\n上海\n华为公司\n", encoding="utf8")
    chars = sorted({c for eg in tiny_examples(flat) for c in eg.reference.text if not c.isspace()})
    vectors = [f"{c} " + " ".join(f"{((i * 7 + k) % 13 - 6) / 6:.3f}" for k in range(8)) for i, c in enumerate(chars)]
    (data / "chars.vec").write_text(f"{len(chars)} 8\n" + "\n".join(vectors) + "\n", encoding="utf8")
    config = tmp_path / "student.cfg"
    block = '\n[flat_distillation]\nteachers = ["nowhere"]\nsoft_weight = 0.7\ntemperature = 1.0\n'
    config.write_text((ROOT / "configs" / "resume.cfg").read_text(encoding="utf8") + block, encoding="utf8")
    return config, data, tmp_path / "teacher"


def test_distill_command_trains_a_student_from_its_teacher_and_resumes(teachers, tmp_path, capfd):
    from spacy_flat.cli.main import main

    from .test_resume import cli_args, overrides

    flat, _ = teachers
    config, data, teacher = student_setup(flat, tmp_path)
    values = cli_args(overrides(data, 12))
    args = ["distill", str(config), "--output", str(tmp_path / "student"), "--teacher", str(teacher)]
    assert main([*args, *values]) == 0
    assert (tmp_path / "student" / "model-last" / "meta.json").exists()
    store = tmp_path / "student" / "teacher-targets.sqlite"
    kept = len(TargetStore(store, store_source(DistillationSettings([str(teacher)]))))
    out = capfd.readouterr().out
    assert kept > 0 and f"kept in {store} (0 segments there)" in out
    assert f"Soft targets of {kept:,} segments: {kept:,} computed by the teachers, 0 read from the store" in out
    # Run again with more steps: it goes on from its checkpoint, the teacher set again, its targets
    # read from the store (the same sentences: nothing new is computed).
    assert main([*args, *cli_args(overrides(data, 16))]) == 0
    out = capfd.readouterr().out
    assert out.count(f"Teachers: {teacher} (soft weight 0.7") == 1 and "Resuming from" in out
    assert f"kept in {store} ({kept:,} segments there)" in out
    assert f"Soft targets of {kept:,} segments: 0 computed by the teachers, {kept:,} read from the store" in out
    assert len(TargetStore(store, store_source(DistillationSettings([str(teacher)])))) == kept
    # '' keeps the targets in memory.
    assert main([*args[:3], str(tmp_path / "memory"), *args[4:], "--target-store", "", *values]) == 0
    assert "in memory" in capfd.readouterr().out and not (tmp_path / "memory" / "teacher-targets.sqlite").exists()
    # A config without teachers is refused with its name.
    config.write_text(config.read_text(encoding="utf8").replace('["nowhere"]', "[]"), encoding="utf8")
    assert main(["distill", str(config), "--output", str(tmp_path / "none"), *values]) == 1
    assert "no teacher" in capfd.readouterr().err


def test_distill_reads_silver_beside_gold_and_refuses_a_changed_silver_file(teachers, tmp_path, capfd):
    from spacy.tokens import DocBin

    from spacy_flat.cli.main import main

    from .conftest import ROOT
    from .test_resume import cli_args, overrides

    flat, _ = teachers
    _, data, teacher = student_setup(flat, tmp_path)
    silver = []
    lines = [
        "北京大学的王五去了上海。",
        "华为公司在南京。",
        "李四在北京工作。",
        "张三去了上海大学。",
        "王五在华为公司。",
    ]
    for line in lines:
        doc = flat.make_doc(line)
        doc.user_data[SILVER] = True
        silver.append(doc)
    DocBin(docs=silver, store_user_data=True).to_disk(data / "silver.spacy")
    # A config without [flat_distillation]: the command's options make it.
    args = ["distill", str(ROOT / "configs" / "resume.cfg"), "--output", str(tmp_path / "student")]
    args += ["--teacher", str(teacher), "--soft-weight", "0.3", "--silver", str(data / "silver.spacy")]
    args += ["--silver-ratio", "0.5"]
    assert main([*args, *cli_args(overrides(data, 8))]) == 0
    written = (tmp_path / "student" / "distill.cfg").read_text(encoding="utf8")
    assert "spacy-flat.gold_and_silver.v1" in written and "soft_weight = 0.3" in written
    assert "soft weight 0.3" in capfd.readouterr().out
    DocBin(docs=silver[:4], store_user_data=True).to_disk(data / "silver.spacy")
    assert main([*args, *cli_args(overrides(data, 12))]) == 1
    assert f"corpus train file changed: {(data / 'silver.spacy').resolve()}" in capfd.readouterr().err


def test_teaching_loss_is_the_weighted_sum_of_gold_and_soft_losses_and_gradients(teachers):
    """(1 - α) gold + α soft on gold rows, soft alone on silver rows: the values and the score
    gradients equal the three losses computed apart and weighted by hand."""
    import torch

    flat, _ = teachers
    student = build_small(steps=5, seed=7)
    ner = student.get_pipe("flat_ner")
    tagger = ner.tagger
    examples = tiny_examples(student)[:4]
    silver_doc = student.make_doc("北京大学的王五去了上海。")
    silver_doc.user_data[SILVER] = True
    examples.append(Example(student.make_doc(silver_doc.text), silver_doc))
    segments, gold = ner._training_segments(examples)
    assert gold[-1] == [] and all(gold[:-1])
    scores = ner.model.predict(segments)
    teacher = CachedTargets(PipelineTeacher(flat))
    targets = teacher.targets(segments)
    alpha = 0.3
    crf = tagger.module.crf

    def crf_grad_of(run):
        for param in tagger.module.parameters():
            param.grad = None
        result = run()
        return result, crf.raw_transitions.grad.clone()

    (loss, d_scores), crf_grad = crf_grad_of(
        lambda: Teaching(teacher, weight=alpha).loss(tagger, segments, scores, gold)
    )
    (gold_loss, d_gold), g_gold = crf_grad_of(lambda: tagger.loss(scores, gold))
    on_gold = [t if g else None for t, g in zip(targets, gold)]
    on_silver = [None if g else t for t, g in zip(targets, gold)]
    (soft_gold, d_soft_gold), g_soft_gold = crf_grad_of(lambda: tagger.soft_loss(scores, on_gold))
    (soft_silver, d_soft_silver), g_soft_silver = crf_grad_of(lambda: tagger.soft_loss(scores, on_silver))
    assert loss == pytest.approx((1 - alpha) * gold_loss + alpha * soft_gold + soft_silver, rel=1e-6)
    want = (1 - alpha) * d_gold + alpha * d_soft_gold + d_soft_silver
    assert numpy.allclose(d_scores, want, atol=1e-6)
    # The CRF's own gradients are weighted the same way.
    assert torch.allclose(crf_grad, (1 - alpha) * g_gold + alpha * g_soft_gold + g_soft_silver, atol=1e-5)


def path_score(crf, emissions, path):
    """start + emissions + transitions + end of one tag path, in float64."""
    trans = crf.transitions.detach().double().numpy()
    start, end = crf.start_transitions.detach().double().numpy(), crf.end_transitions.detach().double().numpy()
    score = start[path[0]] + sum(float(emissions[t, y]) for t, y in enumerate(path)) + end[path[-1]]
    return score + sum(trans[a, b] for a, b in zip(path, path[1:]))


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_top_k_teacher_gives_its_best_paths_with_their_probabilities_renormalised(teachers, temperature):
    from spacy_flat.types import TopPaths

    flat, _ = teachers
    ner = flat.get_pipe("flat_ner")
    texts = [eg.reference.text for eg in tiny_examples(flat)] + [""]
    segments = segments_of(flat, texts)
    rows = PipelineTeacher(flat, temperature=temperature, top_k=3).targets(segments)
    scores = ner.model.predict([s for s in segments if len(s)])
    lengths = [len(s) for s in segments if len(s)]
    forbidden = ner.boundary_rules.forbidden((s.text for s in segments if len(s)), ner.tag_set, scores.shape[1])
    viterbi = ner.tagger.decode(scores, lengths, forbidden)
    for b, row in enumerate(rows[:-1]):
        assert isinstance(row, TopPaths) and row.paths.shape == (3, lengths[b])
        assert len({tuple(p) for p in row.paths.tolist()}) == 3
        assert row.paths[0].tolist() == viterbi[b]
        # The CRF's own probabilities of the three paths, renormalised over them: Z cancels.
        logits = numpy.array([path_score(ner.tagger.module.crf, scores[b], p) for p in row.paths]) / temperature
        want = numpy.exp(logits - logits.max())
        assert numpy.allclose(row.probabilities, want / want.sum(), atol=1e-6)
        assert row.probabilities.sum() == pytest.approx(1.0, abs=1e-6)
        assert list(row.probabilities) == sorted(row.probabilities, reverse=True)
    assert rows[-1].paths.shape == (0, 0) and rows[-1].probabilities.shape == (0,)


def test_cache_computes_each_segments_top_paths_once(teachers):
    flat, _ = teachers
    teacher = PipelineTeacher(flat, top_k=2)
    cache = CachedTargets(teacher)
    segments = segments_of(flat, ["北京大学的张三在上海工作。", "李四去了南京。", "北京大学的张三在上海工作。"])
    first = cache.targets(segments)
    again = cache.targets(segments[1:])
    assert cache.computed == 2 and cache.reused == 3
    want = teacher.targets(segments[1:2])[0]
    for row in (first[1], again[0]):
        assert numpy.array_equal(row.paths, want.paths) and numpy.allclose(row.probabilities, want.probabilities)
    assert numpy.array_equal(first[0].paths, first[2].paths)


def test_an_ensemble_of_top_k_teachers_pools_their_paths_with_mean_probabilities(teachers):
    flat, tener = teachers
    texts = ["北京大学的张三在上海工作。", "李四去了南京。", "华为公司在深圳。"]
    segments = segments_of(flat, texts)
    members = [PipelineTeacher(flat, top_k=2), PipelineTeacher(tener, top_k=2)]
    pooled = EnsembleTeacher(members).targets(segments)
    own = [member.targets(segments) for member in members]
    for k, row in enumerate(pooled):
        want = {}
        for member in own:
            for path, p in zip(member[k].paths.tolist(), member[k].probabilities):
                want[tuple(path)] = want.get(tuple(path), 0.0) + p / 2
        got = {tuple(path): p for path, p in zip(row.paths.tolist(), row.probabilities)}
        assert got.keys() == want.keys() and 2 <= len(got) <= 4
        assert all(got[path] == pytest.approx(want[path], abs=1e-6) for path in got)
        assert row.probabilities.sum() == pytest.approx(1.0, abs=1e-6)
        assert list(row.probabilities) == sorted(row.probabilities, reverse=True)
    with pytest.raises(ValueError, match="all give tag marginals or all give best paths"):
        EnsembleTeacher([PipelineTeacher(flat, top_k=2), PipelineTeacher(tener)])
    with pytest.raises(ValueError, match="top_k = 0"):
        ensemble_entities(EnsembleTeacher(members), flat.get_pipe("flat_ner"), [flat.make_doc(texts[0])])


def silver_of(nlp, texts):
    """Examples without gold, marked silver: learned from the teacher alone."""
    examples = []
    for text in texts:
        doc = nlp.make_doc(text)
        doc.user_data[SILVER] = True
        examples.append(Example(nlp.make_doc(text), doc))
    return examples


def test_top_1_targets_are_training_on_the_teachers_viterbi_path(teachers):
    """One path of probability 1: the same losses, score gradients and training steps as
    gold training on the teacher's own entities (its Viterbi path)."""
    flat, _ = teachers
    texts = [eg.reference.text for eg in tiny_examples(flat)]
    as_gold = [Example(flat.make_doc(t), flat(t)) for t in texts]
    assert any(eg.reference.ents for eg in as_gold)

    def run(top_1):
        fix_random_seed(11)
        nlp = spacy.blank("zh")
        ner = nlp.add_pipe("flat_ner", config=small_config())
        ner.initialize(lambda: tiny_examples(nlp), nlp=nlp, lexicon=small_lexicon())
        if top_1:
            examples = silver_of(nlp, texts)
            ner.teaching = Teaching(PipelineTeacher(flat, top_k=1), weight=0.5)
        else:
            examples = [Example(nlp.make_doc(eg.text), eg.reference) for eg in as_gold]
        segments, gold = ner._training_segments(examples)
        scores = ner.model.predict(segments)
        teaching = ner.teaching
        first = teaching.loss(ner.tagger, segments, scores, gold) if teaching else ner.tagger.loss(scores, gold)
        optimizer = nlp.create_optimizer()
        return first, [nlp.update(examples, sgd=optimizer)["flat_ner"] for _ in range(3)]

    (loss, d_scores), steps = run(True)
    (want_loss, want_d_scores), want_steps = run(False)
    assert loss == pytest.approx(want_loss, rel=1e-6)
    assert numpy.allclose(d_scores, want_d_scores, atol=1e-7)
    assert steps == pytest.approx(want_steps, rel=1e-5)


def test_student_learns_the_teachers_entities_from_its_top_paths_alone(teachers):
    flat, _ = teachers
    fix_random_seed(3)
    nlp = spacy.blank("zh")
    student = nlp.add_pipe("flat_ner", config=small_config())
    gold = tiny_examples(nlp)
    student.initialize(lambda: gold, nlp=nlp, lexicon=small_lexicon())
    cache = CachedTargets(PipelineTeacher(flat, top_k=3))
    student.teaching = Teaching(cache, weight=0.5)
    silver = silver_of(nlp, [eg.reference.text for eg in gold])
    optimizer = nlp.create_optimizer()
    losses = [nlp.update(silver, sgd=optimizer)["flat_ner"] for _ in range(80)]
    assert losses[-1] < losses[0] / 2
    assert cache.computed == len(silver) and cache.reused == 79 * len(silver)
    student.teaching = None
    agree = sum(entities(nlp(eg.reference.text)) == entities(flat(eg.reference.text)) for eg in gold)
    assert agree >= 0.7 * len(gold)


def test_distillation_settings_refuse_unknown_targets_and_bad_top_k():
    from spacy_flat.distillation.settings import DistillationSettings
    from spacy_flat.errors import FlatError

    settings = DistillationSettings.from_config({"targets": "top_k", "top_k": 2}, "student.cfg")
    assert settings.teacher_top_k == 2 and DistillationSettings().teacher_top_k == 0
    with pytest.raises(FlatError, match=r"student\.cfg: \[flat_distillation\] targets must be one of .*'paths'"):
        DistillationSettings.from_config({"targets": "paths"}, "student.cfg")
    for bad in (0, 1.5, True):
        with pytest.raises(FlatError, match=r"\[flat_distillation\] top_k must be"):
            DistillationSettings.from_config({"targets": "top_k", "top_k": bad}, "student.cfg")


def test_distill_command_trains_a_student_from_its_teachers_top_paths(teachers, tmp_path, capfd):
    from spacy_flat.cli.main import main

    from .test_resume import cli_args, overrides

    flat, _ = teachers
    config, data, teacher = student_setup(flat, tmp_path)
    values = cli_args(overrides(data, 8))
    args = ["distill", str(config), "--output", str(tmp_path / "student"), "--teacher", str(teacher)]
    assert main([*args, "--targets", "top_k", "--top-k", "2", *values]) == 0
    assert (tmp_path / "student" / "model-last" / "meta.json").exists()
    written = (tmp_path / "student" / "distill.cfg").read_text(encoding="utf8")
    assert 'targets = "top_k"' in written and "top_k = 2" in written
    assert "Soft targets: the 2 best paths of each teacher" in capfd.readouterr().out
    # An unknown kind of target in the config is refused, naming the block.
    text = config.read_text(encoding="utf8").replace("soft_weight = 0.7", 'soft_weight = 0.7\ntargets = "paths"')
    config.write_text(text, encoding="utf8")
    assert main([*args[:3], str(tmp_path / "other"), *args[4:], *values]) == 1
    assert "[flat_distillation] targets must be one of ['marginals', 'top_k'], got 'paths'" in capfd.readouterr().err


def fresh_student(seed, labels=None):
    fix_random_seed(seed)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=small_config())
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon(), labels=labels)
    return nlp, ner


def mean_kl(teacher_rows, student_rows):
    """The mean over characters of KL(teacher || student) of the tag marginals."""
    total, count = 0.0, 0
    for q, p in zip(teacher_rows, student_rows):
        q, p = q.astype("float64"), numpy.maximum(p.astype("float64"), 1e-12)
        total += float(numpy.where(q > 0, q * (numpy.log(numpy.maximum(q, 1e-12)) - numpy.log(p)), 0.0).sum())
        count += len(q)
    return total / count


@pytest.mark.parametrize("top_k", [0, 2])
def test_distill_moves_the_students_marginals_toward_the_teachers(teachers, top_k):
    """spaCy v4's shape: teacher pipe, distillation examples (reference for the teacher,
    predicted for the student), no gold; the losses fall and the marginals meet."""
    flat, _ = teachers
    teacher = flat.get_pipe("flat_ner")
    nlp, student = fresh_student(13)
    texts = [eg.reference.text for eg in tiny_examples(nlp)]
    examples = [Example(nlp.make_doc(t), flat.make_doc(t)) for t in texts]
    segments, _ = student.segmenter.segments([nlp.make_doc(t) for t in texts])

    def kl():
        return mean_kl(teacher.soft_targets(segments), student.soft_targets(segments))

    before = kl()
    optimizer = nlp.create_optimizer()
    losses = [student.distill(teacher, examples, sgd=optimizer, top_k=top_k)["flat_ner"] for _ in range(12)]
    assert losses[-1] < 0.7 * losses[0]
    assert kl() < 0.5 * before
    # The losses dict is spaCy's: updated under the component's name, other keys kept.
    assert student.distill(teacher, examples[:2], losses={"other": 1.0}).keys() == {"other", "flat_ner"}
    assert student.distill(teacher, [Example(nlp.make_doc(""), flat.make_doc(""))]) == {"flat_ner": 0.0}


def test_distill_refuses_a_teacher_with_other_labels_or_of_another_kind(teachers):
    flat, _ = teachers
    nlp, student = fresh_student(14, labels=["PER"])
    examples = [Example(nlp.make_doc("张三在上海工作。"), flat.make_doc("张三在上海工作。"))]
    with pytest.raises(ValueError, match=r"the teacher has labels .* but the student has \['PER'\]"):
        student.distill(flat.get_pipe("flat_ner"), examples)
    with pytest.raises(ValueError, match="learns from a flat_ner teacher, not from NoneType"):
        student.distill(None, examples)
    nlp, student = fresh_student(14)
    mismatched = [Example(nlp.make_doc("张三在上海工作。"), flat.make_doc("李四在上海工作。"))]
    with pytest.raises(ValueError, match="example 0: the reference and predicted docs differ in text"):
        student.distill(flat.get_pipe("flat_ner"), mismatched)


@pytest.mark.parametrize("top_k", [0, 3])
def test_teacher_student_loss_is_teachings_soft_loss(teachers, top_k):
    """get_teacher_student_loss, Teaching's soft loss on silver rows and one distill step
    give the same loss, score gradient and CRF gradient."""
    import torch

    flat, _ = teachers
    teacher = flat.get_pipe("flat_ner")
    nlp, student = fresh_student(15)
    texts = [eg.reference.text for eg in tiny_examples(nlp)]
    segments, gold = student._training_segments(silver_of(nlp, texts))
    scores = student.model.predict(segments)
    targets = teacher.soft_targets(segments, temperature=2.0, top_k=top_k)
    crf = student.tagger.module.crf

    def with_crf_grad(run):
        for param in student.tagger.module.parameters():
            param.grad = None
        loss, d_scores = run()
        return loss, d_scores, crf.raw_transitions.grad.clone()

    ours = with_crf_grad(lambda: student.get_teacher_student_loss(targets, scores, temperature=2.0))
    teaching = Teaching(PipelineTeacher(flat, temperature=2.0, top_k=top_k), weight=0.5, temperature=2.0)
    want = with_crf_grad(lambda: teaching.loss(student.tagger, segments, scores, gold))
    assert ours[0] == pytest.approx(want[0], rel=1e-6) and ours[0] > 0
    assert numpy.allclose(ours[1], want[1], atol=1e-7) and torch.allclose(ours[2], want[2], atol=1e-6)
    # One distill step (no optimizer) reports the same loss and accumulates the same CRF gradient.
    examples = [Example(nlp.make_doc(t), flat.make_doc(t)) for t in texts]
    for param in student.tagger.module.parameters():
        param.grad = None
    losses = student.distill(teacher, examples, temperature=2.0, top_k=top_k)
    assert losses["flat_ner"] == pytest.approx(want[0], rel=1e-5)
    assert torch.allclose(crf.raw_transitions.grad, want[2], atol=1e-5)


def test_students_of_the_same_teachers_share_their_targets(teachers, tmp_path):
    """A second student of the same teachers and settings reuses the first one's cache: the teachers
    compute nothing more, and the student trains exactly as with a cache of its own."""
    from spacy_flat.distillation.settings import DistillationSettings
    from spacy_flat.distillation.student import attach_teachers

    flat, _ = teachers
    flat.to_disk(tmp_path / "teacher")
    settings = DistillationSettings([str(tmp_path / "teacher")])

    def train(nlp, cache=None):
        shared = attach_teachers(nlp, settings, cache)
        examples = tiny_examples(nlp)
        fix_random_seed(5)
        optimizer = nlp.create_optimizer()
        losses = [nlp.update(examples, sgd=optimizer)["flat_ner"] for _ in range(3)]
        return shared, losses

    first, _ = train(fresh_student(20)[0])
    computed = first.computed
    assert computed > 0
    shared, losses = train(fresh_student(21)[0], first)
    assert shared is first and first.computed == computed and first.reused > 0
    own, own_losses = train(fresh_student(21)[0])
    assert own is not first and own.computed == computed
    assert losses == own_losses
    hotter = DistillationSettings([str(tmp_path / "teacher")], temperature=2.0)
    with pytest.raises(ValueError, match="cached targets come from"):
        attach_teachers(fresh_student(22)[0], hotter, first)
