"""benchmarks/training_speed.py's measurement: two epochs of a config through the training loop, the
first (cold) one computing the features that the second (warm) one reads from the feature cache."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

import training_speed  # noqa: E402
from common import splits  # noqa: E402


def test_two_epochs_of_the_real_loop_are_timed(tmp_path):
    result = training_speed.worker(
        {
            "config": "resume.cfg",
            "configs": str(ROOT / "configs"),
            "train": str(splits("resume")["train"]),
            "sentences": 24,
            "gpu_id": -1,
            "work": str(tmp_path),
            "overrides": {"training.batcher.size": 200},
        }
    )
    # 24 sentences of about 32 characters in padded batches of 200: several steps an epoch, two epochs.
    assert result["steps"] >= 6
    assert result["cold_s"] > 0 and result["warm_s"] > 0 and result["init_s"] > 0
    assert result["cache_mb"] > 0  # the cold epoch filled the feature cache
    assert not (tmp_path / "run" / "model-last").exists()  # nothing saved: the loop's steps alone
