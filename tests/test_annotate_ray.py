"""`annotate --engine ray` (annotation/ray_engine.py) on a local Ray: output equal
to the local engine's line for line, bad records counted the same, an actor killed
in the middle of a run leaving every document in the output exactly once, a run
stopped after some shards resuming, and the Dataset entry point. Skipped without
the [ray] extra."""

import json

import pytest

ray = pytest.importorskip("ray")

from spacy_flat.annotation.local import AnnotateSettings, annotate  # noqa: E402
from spacy_flat.annotation.ray_engine import (  # noqa: E402
    CRASH_AFTER_ENV,
    CRASH_MARKER_ENV,
    annotate_dataset,
    annotate_with_ray,
)
from spacy_flat.annotation.records import RecordFormat  # noqa: E402

from .conftest import needs_shared  # noqa: E402
from .test_annotate import read_shards, sentences  # noqa: E402

# Ray's own modules warn of their deprecated options; the suite turns warnings into errors.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

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
    env = {CRASH_AFTER_ENV: "3", CRASH_MARKER_ENV: str(root / "crashed")}
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
    out = annotate_dataset(ray.data.from_items(rows), str(root / "model"), batch_size=8, actors=1)
    lines = [json.loads(row["line"]) for row in out.take_all()]
    assert sorted(int(r["id"]) for r in lines) == list(range(20))
    assert all("entities" in r for r in lines)
