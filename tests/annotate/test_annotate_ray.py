"""`annotate --engine ray` (annotation/ray_engine.py) on a local Ray: output equal
to the local engine's line for line, bad records counted the same, an actor killed
in the middle of a run leaving every document in the output exactly once, a
document that kills its worker every time skipped and reported rather than
retried for ever, a run stopped after some shards resuming, Parquet in and out,
GPUs shared among actors, and the Dataset entry point. Skipped without the [ray]
extra."""

import gzip
import json

import pytest

ray = pytest.importorskip("ray")

from spacy_flat.annotate.batches import WORKER_DIED  # noqa: E402
from spacy_flat.annotate.local import AnnotateSettings, annotate  # noqa: E402
from spacy_flat.annotate.ray_actor import CRASH_AFTER_ENV, CRASH_MARKER_ENV, CRASH_ON_TEXT_ENV  # noqa: E402
from spacy_flat.annotate.ray_engine import annotate_dataset, annotate_with_ray, gpus_per_actor  # noqa: E402
from spacy_flat.annotate.records import RecordFormat  # noqa: E402
from spacy_flat.annotate.shards import read_shards as read_any_shards  # noqa: E402
from spacy_flat.errors import FlatError  # noqa: E402

from ..util import needs_shared  # noqa: E402
from .test_annotate import read_shards, sentences  # noqa: E402

# Ray's own modules warn of their deprecated options; the suite turns warnings into errors.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

MARKER = "致命标记"  # a document holding it kills its worker (the fault hook)
SETTINGS = AnnotateSettings(batch_size=16, shard_size=100, progress=False)


@pytest.fixture(scope="module")
def corpus(trained_nlp, tmp_path_factory):
    """A saved tiny pipeline and 300 real sentences in JSON lines, with bad records among them."""
    root = tmp_path_factory.mktemp("ray")
    trained_nlp.to_disk(root / "model")
    lines = [json.dumps({"text": t, "n": k}, ensure_ascii=False) for k, t in enumerate(sentences(300))]
    lines[10:10] = ["{not json", json.dumps({"text": ""}), json.dumps({"body": "no text"})]
    (root / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf8")
    local = annotate(str(root / "model"), [str(root / "in.jsonl")], root / "local", RecordFormat(), SETTINGS)
    return root, local


@pytest.fixture(scope="module")
def local_ray(corpus):
    root = corpus[0]
    env = {CRASH_AFTER_ENV: "3", CRASH_MARKER_ENV: str(root / "crashed"), CRASH_ON_TEXT_ENV: MARKER}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    yield root / "crashed"
    ray.shutdown()


@needs_shared
def test_ray_output_equals_the_local_engine_and_survives_a_killed_actor(corpus, local_ray):
    root, local = corpus
    summary = annotate_with_ray(str(root / "model"), [str(root / "in.jsonl")], root / "ray", None, SETTINGS, actors=2)
    # One actor exited hard after its third batch (the fault hook); Ray restarted it and retried the batch.
    assert local_ray.exists()
    records = read_shards(root / "ray")
    assert records == read_shards(root / "local")
    assert len(records) == 300 and len({r["id"] for r in records}) == 300
    assert [r["n"] for r in records] == list(range(300))
    for key in ("read", "annotated", "skipped", "skipped_by_reason", "problems"):
        assert summary[key] == local[key], key
    assert summary["skipped"] == 3 and summary["shards_written"] == 3


@needs_shared
def test_a_stopped_ray_run_resumes_to_the_uninterrupted_output(corpus, local_ray):
    root, _ = corpus
    out = root / "resumed"
    annotate_with_ray(str(root / "model"), [str(root / "in.jsonl")], out, None, SETTINGS, actors=1)
    (out / "shard-00001.jsonl").unlink()  # as if the run had stopped while writing it
    (out / "shard-00002.jsonl").unlink()
    again = annotate_with_ray(str(root / "model"), [str(root / "in.jsonl")], out, None, SETTINGS, actors=1)
    assert (again["shards_reused"], again["shards_written"]) == (1, 2)
    assert read_shards(out) == read_shards(root / "local")


@needs_shared
def test_the_dataset_entry_point(corpus, local_ray):
    root, _ = corpus
    rows = [{"shard": 0, "id": str(k), "text": t, "fields": "{}"} for k, t in enumerate(sentences(20))]
    rows[3]["text"] = MARKER + rows[3]["text"]
    out = annotate_dataset(ray.data.from_items(rows), str(root / "model"), batch_size=8, actors=1).take_all()
    lines = [json.loads(row["line"]) for row in out if row["line"]]
    assert sorted(int(r["id"]) for r in lines) == [k for k in range(20) if k != 3]
    assert all("entities" in r for r in lines)
    assert [row["skipped"] for row in out if row["skipped"]] == [WORKER_DIED]


@needs_shared
def test_a_document_that_kills_its_worker_every_time_is_skipped_and_reported(corpus, local_ray, tmp_path):
    root, _ = corpus
    texts = sentences(60)
    texts[20] = MARKER + texts[20]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf8")
    settings = AnnotateSettings(batch_size=16, shard_size=30, progress=False)
    summary = annotate_with_ray(str(root / "model"), [str(tmp_path / "in.txt")], tmp_path / "out", None, settings)
    # Two whole-batch attempts, then one document at a time: the third death names the document.
    assert (summary["read"], summary["annotated"], summary["skipped"]) == (60, 59, 1)
    assert summary["skipped_by_reason"] == {WORKER_DIED: 1}
    assert summary["problems"] == [f"{tmp_path / 'in.txt'}:21: {WORKER_DIED}"]
    records = read_shards(tmp_path / "out")
    assert [r["id"] for r in records] == [f"{tmp_path / 'in.txt'}:{k}" for k in range(1, 61) if k != 21]
    # The local engine (no fault hook) annotates the same file: batches the worker never died in are
    # equal to the last digit, though Ray retried the first batch with the second; the batch redone
    # one document at a time has the same entities.
    annotate(str(root / "model"), [str(tmp_path / "in.txt")], tmp_path / "local", None, settings)
    local = [r for r in read_shards(tmp_path / "local") if not r["id"].endswith(":21")]
    in_batch = {f"{tmp_path / 'in.txt'}:{k}" for k in range(17, 31)}  # the second batch of 16 in the first shard
    assert [r for r in records if r["id"] not in in_batch] == [r for r in local if r["id"] not in in_batch]
    spans = [[(e["start"], e["end"], e["label"]) for e in r["entities"]] for r in records]
    assert spans == [[(e["start"], e["end"], e["label"]) for e in r["entities"]] for r in local]


@needs_shared
def test_parquet_in_and_out_on_ray(corpus, local_ray, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root, _ = corpus
    texts = sentences(120)
    pq.write_table(pa.table({"text": texts[:80], "n": list(range(80))}), tmp_path / "in.parquet", row_group_size=30)
    (tmp_path / "more.txt").write_text("\n".join(texts[80:100]) + "\n", encoding="utf8")
    with gzip.open(tmp_path / "last.jsonl.gz", "wt", encoding="utf8") as f:
        f.write("{broken\n")
        f.writelines(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts[100:])
    settings = AnnotateSettings(batch_size=16, shard_size=50, progress=False, output_format="parquet")
    inputs = [str(tmp_path / name) for name in ("in.parquet", "more.txt", "last.jsonl.gz")]
    local = annotate(str(root / "model"), inputs, tmp_path / "local", RecordFormat(), settings)
    remote = annotate_with_ray(str(root / "model"), inputs, tmp_path / "ray", None, settings)
    # Shards that span files, a gzip member read on the workers, a bad record: equal to the local engine.
    assert read_any_shards(tmp_path / "ray") == read_any_shards(tmp_path / "local")
    assert (remote["read"], remote["annotated"], local["annotated"]) == (120, 120, 120)
    assert (
        remote["problems"]
        == local["problems"]
        == [f"{tmp_path / 'last.jsonl.gz'}:1: not JSON (Expecting property name enclosed in double quotes)"]
    )
    assert sorted(p.name for p in (tmp_path / "ray").glob("shard-*")) == [f"shard-0000{k}.parquet" for k in range(3)]


class FakeRay:
    def __init__(self, gpus):
        self.gpus = gpus

    def cluster_resources(self):
        return {"CPU": 16.0, "GPU": self.gpus} if self.gpus else {"CPU": 16.0}


def test_gpus_are_shared_among_actors():
    assert gpus_per_actor(FakeRay(1), "auto", 4) == 0.25
    assert gpus_per_actor(FakeRay(8), "auto", 2) == 1.0
    assert gpus_per_actor(FakeRay(2), "auto", 3) == 0.5  # 0.667 each would leave the third actor unplaced
    assert gpus_per_actor(FakeRay(1), "auto", 3) == 0.3333
    assert gpus_per_actor(FakeRay(1), 0.5, 4) == 0.5
    assert gpus_per_actor(FakeRay(0), 0.0, 4) == 0.0
    with pytest.raises(FlatError, match="has none"):
        gpus_per_actor(FakeRay(0), "auto", 2)
