"""The file that keeps the teachers' soft targets across runs and processes."""

import sqlite3

import numpy
import pytest
import srsly
from spacy.util import fix_random_seed

from spacy_flat.distillation.settings import DistillationSettings
from spacy_flat.distillation.store import TargetStore, segment_key, store_source
from spacy_flat.distillation.teachers import CachedTargets, PipelineTeacher
from spacy_flat.errors import FlatError
from spacy_flat.pipeline.teaching import Teaching
from spacy_flat.types import TopPaths

from .conftest import build_small, tiny_examples
from .test_distillation import fresh_student, segments_of

TEXTS = ["北京大学的张三在上海工作。", "李四去了南京。", "华为公司在深圳。"]


@pytest.fixture(scope="module")
def teacher():
    return build_small(steps=40, seed=0)


class NoTeacher:
    """Stands for a teacher that must not be asked: every target comes from the store."""

    def __init__(self, labels, reads_whole_docs=False):
        self.labels, self.reads_whole_docs, self.top_k = labels, reads_whole_docs, 0

    def targets(self, segments):
        raise AssertionError(f"the teacher was asked for {len(segments)} segments")


def test_store_keeps_marginals_and_paths_as_they_were_cached(tmp_path):
    marginals = numpy.random.default_rng(0).dirichlet(numpy.ones(5), size=7).astype("float32")
    paths = TopPaths(numpy.array([[0, 1, 2], [0, 0, 2]], dtype="int16"), numpy.array([0.75, 0.25], dtype="float32"))
    store = TargetStore(tmp_path / "sub" / "targets.sqlite", "source")
    store.put({b"m": marginals, b"p": paths})
    store.put({b"m": numpy.zeros_like(marginals)})  # the first row of a key stays
    store.close()
    again = TargetStore(tmp_path / "sub" / "targets.sqlite", "source")
    found = again.get([b"m", b"p", b"absent", b"m"])
    assert sorted(found) == [b"m", b"p"] and len(again) == 2
    assert found[b"m"].dtype == numpy.float16 and numpy.array_equal(found[b"m"], marginals.astype("float16"))
    assert isinstance(found[b"p"], TopPaths)
    assert numpy.array_equal(found[b"p"].paths, paths.paths) and numpy.array_equal(
        found[b"p"].probabilities, paths.probabilities
    )
    # More keys than SQLite takes in one statement are read in parts.
    many = {segment_key(str(k), 0, ""): marginals[:1] for k in range(1200)}
    again.put(many)
    assert len(again.get(many)) == 1200


def test_store_refuses_other_teachers_another_format_and_a_file_of_another_kind(tmp_path):
    path = tmp_path / "targets.sqlite"
    TargetStore(path, '{"teachers": ["a"]}').close()
    with pytest.raises(FlatError, match="holds the soft targets of other teachers or settings") as err:
        TargetStore(path, '{"teachers": ["b"]}')
    assert str(path) in str(err.value) and '["a"]' in str(err.value) and '["b"]' in str(err.value)
    with sqlite3.connect(str(path)) as db:
        db.execute("UPDATE meta SET value = '0' WHERE name = 'format'")
    with pytest.raises(FlatError, match="stored in format 0"):
        TargetStore(path, '{"teachers": ["a"]}')
    other = tmp_path / "notes.sqlite"
    other.write_bytes(srsly.msgpack_dumps({"not": "sqlite"}) * 100)
    with pytest.raises(FlatError, match=f"{other}: not a store of soft targets"):
        TargetStore(other, "source")


def test_store_source_follows_the_teachers_files_and_settings_not_their_path(teacher, tmp_path):
    teacher.to_disk(tmp_path / "teacher")
    settings = DistillationSettings([str(tmp_path / "teacher")])
    source = store_source(settings)
    (tmp_path / "teacher").rename(tmp_path / "moved")
    assert store_source(DistillationSettings([str(tmp_path / "moved")])) == source
    assert store_source(DistillationSettings([str(tmp_path / "moved")], temperature=2.0)) != source
    assert store_source(DistillationSettings([str(tmp_path / "moved")], targets="top_k")) != source
    # Trained again (other weights) at the same path: other targets.
    build_small(steps=5, seed=1).to_disk(tmp_path / "moved")
    assert store_source(DistillationSettings([str(tmp_path / "moved")])) != source


def test_a_second_cache_reads_the_first_ones_targets_from_the_store(teacher, tmp_path):
    segments = segments_of(teacher, TEXTS + TEXTS[:1])
    first = CachedTargets(PipelineTeacher(teacher), store=TargetStore(tmp_path / "t.sqlite", "s"))
    computed = first.targets(segments)
    assert (first.computed, first.loaded, first.reused) == (3, 0, 1)
    second = CachedTargets(NoTeacher(first.labels), store=TargetStore(tmp_path / "t.sqlite", "s"))
    loaded = second.targets(segments)
    assert (second.computed, second.loaded, second.reused) == (0, 3, 1)
    assert all(numpy.array_equal(a, b) for a, b in zip(computed, loaded))
    assert all(b.dtype == numpy.float32 for b in loaded)
    # Later epochs are served from memory: the store is not read again.
    second.store = None
    second.targets(segments)
    assert second.reused == 5


def test_a_student_trains_the_same_on_stored_targets_as_on_computed_ones(teacher, tmp_path):
    """A resumed run reads its teacher's targets from the store: its student must learn exactly
    what it would have learnt had the teacher computed them again."""

    def train(cache):
        nlp, student = fresh_student(31)
        student.teaching = Teaching(cache, weight=0.5)
        examples = tiny_examples(nlp)
        fix_random_seed(7)
        optimizer = nlp.create_optimizer()
        return [nlp.update(examples, sgd=optimizer)["flat_ner"] for _ in range(3)]

    computing = CachedTargets(PipelineTeacher(teacher), store=TargetStore(tmp_path / "t.sqlite", "s"))
    computed = train(computing)
    assert computing.computed > 0
    reading = CachedTargets(NoTeacher(computing.labels), store=TargetStore(tmp_path / "t.sqlite", "s"))
    assert train(reading) == computed and reading.loaded == computing.computed


def test_two_processes_fill_one_store_at_once(tmp_path):
    """Students trained side by side share the file: writers in two processes at once, overlapping
    keys, and every row is there once, as its first writer stored it."""
    import subprocess
    import sys

    script = (
        "import sys, numpy\n"
        "from spacy_flat.distillation.store import TargetStore, segment_key\n"
        "store = TargetStore(sys.argv[1], 'source')\n"
        "first, fill = int(sys.argv[2]), float(sys.argv[3])\n"
        "for k in range(first, first + 300, 10):\n"
        "    store.put({segment_key(str(j), 0, ''): numpy.full((3, 4), fill) for j in range(k, k + 10)})\n"
    )
    path = tmp_path / "shared.sqlite"
    TargetStore(path, "source").close()
    runs = [subprocess.Popen([sys.executable, "-c", script, str(path), str(first), str(first)]) for first in (0, 150)]
    assert [run.wait(timeout=120) for run in runs] == [0, 0]
    store = TargetStore(path, "source")
    assert len(store) == 450
    rows = store.get([segment_key(str(j), 0, "") for j in range(450)])
    assert all(float(row[0, 0]) in (0.0, 150.0) for row in rows.values())
    assert all(float(rows[segment_key(str(j), 0, "")][0, 0]) == 0.0 for j in range(150))
    assert all(float(rows[segment_key(str(j), 0, "")][0, 0]) == 150.0 for j in range(300, 450))
