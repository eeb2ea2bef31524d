"""Typed lexicons (gazetteers): word types in the lexicon, the readers of typed
word lists, the type embedding, and a pipeline that trains, saves and loads with them."""

import lzma

import numpy
import pytest
import spacy
import torch
from spacy.util import fix_random_seed

from spacy_flat.errors import LexiconError
from spacy_flat.lattice.char_vocab import CharVocab
from spacy_flat.lattice.features import featurize
from spacy_flat.lattice.gazetteers import add_gazetteers, read_gazetteer, read_tagged_words, read_typed_words
from spacy_flat.lattice.lexicon import MAX_TYPES, Lexicon
from spacy_flat.nn.embeddings import TypeEmbedding

from ..util import SHARED, SMALL_WORDS, needs_shared, scores_of, small_config, tiny_examples

THUOCL = SHARED / "lexicons" / "thuocl"
ADMIN = SHARED / "lexicons" / "admin-divisions-of-china"


def test_words_keep_every_type_they_are_given():
    lexicon = Lexicon(["北京", "上海"])
    assert lexicon.extend(["北京", "南京"], types=("place",)) == 1
    lexicon.add("北京", types=("city",))
    lexicon.add("李白", types=("person",))
    assert lexicon.types == ["place", "city", "person"]
    assert lexicon.types_of("北京") == ["place", "city"]
    assert lexicon.types_of("南京") == ["place"]
    assert lexicon.types_of("上海") == [] and lexicon.types_of("没有") == []
    assert list(lexicon.type_bits) == [0b011, 0, 0b001, 0b100]


def test_types_survive_serialization_and_old_lexicons_load_without_types():
    lexicon = Lexicon(["北京", "上海"], numpy.ones((2, 3), dtype="float32"))
    lexicon.extend(["北京", "长江"], types=("place",))
    loaded = Lexicon.from_bytes(lexicon.to_bytes())
    assert loaded.types == ["place"] and loaded.types_of("长江") == ["place"] and loaded.types_of("上海") == []
    assert loaded.has_vector("北京") and not loaded.has_vector("长江")
    old = Lexicon.from_bytes(Lexicon(["北京"]).to_bytes())
    assert old.types == [] and list(old.type_bits) == [0]


def test_too_many_types_and_empty_type_names_are_refused():
    lexicon = Lexicon()
    for k in range(MAX_TYPES):
        lexicon.add(f"词{k}", types=(f"t{k}",))
    with pytest.raises(LexiconError, match="at most 63"):
        lexicon.add("多余", types=("one more",))
    with pytest.raises(LexiconError, match="non-empty"):
        lexicon.add("北京", types=("",))


@needs_shared
def test_thuocl_places_with_bom_and_cr_line_ends_read_every_word():
    words, report = read_gazetteer(THUOCL / "THUOCL_diming.txt.xz")
    # CORPORA.md: 44,804 entries, CR-only line ends and a BOM.
    assert len(words) == 44804 and words[:2] == ["中国", "北京"]
    assert not any("\r" in w or "\ufeff" in w for w in words)
    assert report.kept == 44804


@needs_shared
def test_admin_division_csv_reads_the_name_column_and_counts_repeats():
    words, report = read_gazetteer(ADMIN / "areas.csv")
    assert "东城区" in words and not any(w.isdigit() for w in words)
    assert report.read == 2978 and report.repairs["duplicates"] == 2978 - len(words)


def test_bad_word_lists_name_the_file_and_line(tmp_path):
    bad = tmp_path / "brands.txt.xz"
    with lzma.open(bad, "wb") as f:
        f.write("华为\n小米\n".encode() + b"\xff\xfe\n")
    with pytest.raises(LexiconError, match=r"brands.txt.xz:3: not valid UTF-8"):
        read_gazetteer(bad)
    typed = tmp_path / "typed.tsv"
    typed.write_text("华为\tbrand,company\n小米\n", encoding="utf8")
    with pytest.raises(LexiconError, match=r"typed.tsv:2: expected 'word<TAB>type"):
        read_typed_words(typed)
    with pytest.raises(LexiconError, match="no such word list"):
        read_gazetteer(tmp_path / "absent.txt")


def test_add_gazetteers_types_words_per_file_and_per_word(tmp_path):
    brands = tmp_path / "brands.txt"
    brands.write_text("华为\t12\n小米\t7\n", encoding="utf8")
    typed = tmp_path / "typed.tsv"
    typed.write_text("华为\tcompany\n李白\tperson,poet\n", encoding="utf8")
    lexicon = Lexicon(["北京", "华为"])
    add_gazetteers(lexicon, {"brand": str(brands)}, str(typed))
    assert lexicon.types_of("华为") == ["brand", "company"]
    assert lexicon.types_of("李白") == ["person", "poet"] and lexicon.types_of("北京") == []


def test_tagged_dictionaries_type_the_words_of_the_tags_asked_for(tmp_path):
    tagged = tmp_path / "dict.txt"
    tagged.write_text("李白 320 nr\n北京 3400 ns\n吃饭 900 v\n京 12 ns\n\n新华社 1200 nt\n", encoding="utf8")
    by_type, report = read_tagged_words(tagged, {"nr": "person", "ns": "place", "nt": "organization"})
    assert by_type == {"person": ["李白"], "place": ["北京"], "organization": ["新华社"]}
    assert report.read == 5 and report.kept == 3
    lexicon = Lexicon(["北京", "吃饭"])
    add_gazetteers(lexicon, {}, tagged_words=(tagged, {"ns": "place", "nr": "person"}))
    # Tagged words join the lexicon; a word already in it keeps its row and gains the type.
    assert lexicon.types_of("北京") == ["place"] and lexicon.types_of("李白") == ["person"]
    assert "新华社" not in lexicon and lexicon.types_of("吃饭") == [] and len(lexicon) == 3
    with pytest.raises(LexiconError, match=r"dict.txt: no word is tagged 'nrr'"):
        read_tagged_words(tagged, {"nrr": "person"})
    tagged.write_text("李白 320 nr\n杜甫 nr\n", encoding="utf8")
    with pytest.raises(LexiconError, match=r"dict.txt:2: expected 'word freq tag'"):
        read_tagged_words(tagged, {"nr": "person"})


def test_jieba_lexicons_type_jiebas_own_words_by_their_tags(tmp_path):
    from spacy.util import registry

    from spacy_flat.lattice.readers import jieba_dir

    tags = {"nr": "person", "ns": "place", "nt": "organization"}
    lexicon = registry.misc.get("spacy-flat.jieba_lexicon.v1")(jieba_types=tags)()
    assert sorted(lexicon.types) == ["organization", "person", "place"]
    # Count the tagged words of dict.txt independently of the reader.
    expected = {t: set() for t in tags.values()}
    for line in (jieba_dir() / "dict.txt").read_text(encoding="utf8").splitlines():
        word, _, tag = line.split()
        if tag in tags and len(word) >= 2:
            expected[tags[tag]].add(word)
    for type_name, words in expected.items():
        assert sum(type_name in lexicon.types_of(w) for w in words) == len(words) > 1000
    plain = registry.misc.get("spacy-flat.jieba_lexicon.v1")()()
    assert len(plain) == len(lexicon) and plain.types == []
    vectors = tmp_path / "words.vec"
    vectors.write_text("2 3\n北京 1 0 0\n长城 0 1 0\n", encoding="utf8")
    w2v = registry.misc.get("spacy-flat.word2vec_lexicon.v1")(str(vectors), jieba_types={"ns": "place"})()
    assert w2v.types_of("北京") == ["place"] and w2v.has_vector("北京")
    assert len(w2v) == 2 + len(expected["place"] - {"北京", "长城"})


def test_type_embedding_sums_a_words_types_and_ignores_types_it_never_learned():
    embed = TypeEmbedding(2, 4)
    out = embed(torch.tensor([0, 0b01, 0b10, 0b11, 0b111]))
    weight = embed.weight.detach()
    assert torch.allclose(out[0], torch.zeros(4))
    assert torch.allclose(out[3], weight[0] + weight[1])
    # Bit 2: a type added to the lexicon after training.
    assert torch.allclose(out[4], out[3])


def test_featurize_carries_type_bits_only_for_typed_lexicons():
    vocab = CharVocab(list("北京上海"))
    plain = featurize(["北京上海"], Lexicon(["北京", "上海"]), vocab, word_rows=10)
    assert plain.word_types is None
    lexicon = Lexicon(["北京", "上海"])
    lexicon.extend(["上海"], types=("place",))
    typed = featurize(["北京上海"], lexicon, vocab, word_rows=10)
    assert list(typed.word_types) == [0, 1]


def _typed_pipeline(tmp_path):
    places = tmp_path / "places.txt"
    places.write_text("北京\n上海\n广州\n南京\n杭州\n深圳\n", encoding="utf8")
    companies = tmp_path / "companies.txt"
    companies.write_text("华为公司\n腾讯公司\n", encoding="utf8")
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=small_config())
    examples = tiny_examples(nlp)

    def load() -> Lexicon:
        lexicon = Lexicon(SMALL_WORDS)
        add_gazetteers(lexicon, {"place": str(places), "company": str(companies)})
        return lexicon

    ner.initialize(lambda: examples, nlp=nlp, lexicon=load)
    initial = ner.tagger.module.embeddings.type_embed.weight.detach().clone()
    optimizer = nlp.create_optimizer()
    for _ in range(30):
        nlp.update(examples, sgd=optimizer)
    return nlp, initial


def test_a_typed_pipeline_learns_type_embeddings_and_keeps_them_through_save_and_load(tmp_path):
    nlp, initial = _typed_pipeline(tmp_path)
    ner = nlp.get_pipe("flat_ner")
    assert ner.cfg["word_types"] == ["place", "company"]
    type_embed = ner.tagger.module.embeddings.type_embed
    assert type_embed is not None and type_embed.weight.shape == (2, 16)
    # Training moved both type vectors off their initialization.
    moved = (type_embed.weight.detach() - initial).abs().sum(1)
    assert bool((moved > 1e-4).all()), moved
    text = "他在北京的华为公司工作，后来去了上海。"
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    numpy.testing.assert_allclose(scores_of(loaded, text), scores_of(nlp, text), rtol=1e-5, atol=1e-5)
    assert loaded.get_pipe("flat_ner").resources.lexicon.types_of("北京") == ["place"]


def test_a_type_added_at_run_time_changes_what_the_model_reads(tmp_path):
    nlp, _ = _typed_pipeline(tmp_path)
    lexicon = nlp.get_pipe("flat_ner").resources.lexicon
    text = "他在苏州的小米公司工作。"
    # The word first without a type, so that what changes next is its type alone.
    lexicon.add("苏州")
    before = scores_of(nlp, text)
    lexicon.add("苏州", types=("place",))
    assert lexicon.types_of("苏州") == ["place"]
    after_place = scores_of(nlp, text)
    assert not numpy.allclose(before, after_place)
    # A type the model never trained with is kept in the lexicon, and read as no type.
    lexicon.add("小米公司")
    untyped = scores_of(nlp, text)
    lexicon.add("小米公司", types=("brand",))
    assert lexicon.types_of("小米公司") == ["brand"]
    numpy.testing.assert_allclose(scores_of(nlp, text), untyped, rtol=1e-6, atol=1e-6)
