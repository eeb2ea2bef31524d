"""Test F1 of flat_ner against the paper and against spaCy's own `ner`, trained on the same data.

Both pipelines train with `spacy train` on DocBins converted from ../shared/data,
select on dev, and are scored once on test (exact character spans). Seeds vary the
initialization; mean and spread are reported.

    python benchmarks/accuracy.py resume --seeds 0 1 2 [--epochs 30] [--ablation msm|mld|head]
    python benchmarks/accuracy.py weibo --peer            # also train spaCy's ner
    python benchmarks/accuracy.py weibo --seeds 0 1 2 --peer --peer-seeds 0
    python benchmarks/accuracy.py weibo --lexicon w2v     # the shared word2vec words and vectors
    python benchmarks/accuracy.py weibo --lexicon w2v --normalize  # pretrained vectors at unit length
    python benchmarks/accuracy.py weibo --set components.flat_ner.model.bigram_rows=50000
    python benchmarks/accuracy.py msra --epochs 1 --peer-only --peer-set training.eval_frequency=1000
    python benchmarks/accuracy.py weibo --lexicon w2v --select-on-test  # the original code's figure, see below
    python benchmarks/accuracy.py weibo --inputs wiki-words own-bigrams gazetteers  # pretrained tables, see INPUTS
    python benchmarks/accuracy.py resume --config resume_tener.cfg    # TENER instead of FLAT
    python benchmarks/accuracy.py msra --epochs 5 --gpu-id 0           # train and score on a GPU

Each run also writes its figures as result records (benchmarks/results.py): one for flat_ner over its
seeds, one for the peer, named from dataset, config, inputs, epochs, seeds and settings, e.g.
benchmarks/results/accuracy-msra-dcsan-wiki-words+own-bigrams-4ep-s012.json (--results DIR: elsewhere).

--select-on-test trains with the test set in the dev set's place, so the model kept
is the one with the best test F1 of all evaluations. That is not a valid selection:
it measures what the original FLAT code's per-epoch test logging reports, to say how
much of a gap to the paper is the protocol rather than the model.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from spacy.cli.train import train
from spacy.util import load_config

sys.path.insert(0, str(Path(__file__).parent))
from common import ROOT, SEEDS_COLUMNS, machine, markdown_table, paper_rows, seeds_row, spacy_ner_config, splits
from results import over_seeds, record, results_option, slug

from spacy_flat.cli.evaluate import evaluate
from spacy_flat.cli.schedule import apply_overrides, schedule_for
from spacy_flat.training.loop import train as resumable_train

PAPER = {  # test F1, Table 2 of Li et al. 2020 and its baselines
    "resume": {"FLAT (YJ)": 95.45, "FLAT (LS)": 94.93, "Lattice LSTM": 94.46, "TENER": 95.00},
    "weibo": {"FLAT (YJ)": 60.32, "FLAT (LS)": 63.42, "Lattice LSTM": 58.79, "TENER": 58.39},
    "msra": {"FLAT (YJ)": 94.12, "FLAT (LS)": 94.35, "Lattice LSTM": 93.18, "TENER": 92.74},
}
# Lexicons other than jieba's embedded default: words (and vectors) from ../shared.
LEXICONS = {
    "w2v": {
        "initialize.components.flat_ner.lexicon": {
            "@misc": "spacy-flat.word2vec_lexicon.v1",
            "path": str(ROOT.parent / "shared/vectors/synonyms-wiki-w2v-100d/words.vector"),
        }
    },
    # The word2vec words with their vectors, joined by jieba's words (without vectors).
    "w2v+jieba": {
        "initialize.components.flat_ner.lexicon": {
            "@misc": "spacy-flat.word2vec_lexicon.v1",
            "path": str(ROOT.parent / "shared/vectors/synonyms-wiki-w2v-100d/words.vector"),
            "jieba_words": True,
        }
    },
}


# Pretrained inputs, combined by --inputs. Tables of `pretrain-vectors`
# are read from --pretrained (default training/pretrain/full); unit length unless --raw (characters: always).
GAZETTEERS = {
    "place": ",".join(
        str(ROOT.parent / "shared/lexicons" / name)
        for name in (
            "thuocl/THUOCL_diming.txt.xz",
            "admin-divisions-of-china/provinces.csv",
            "admin-divisions-of-china/cities.csv",
            "admin-divisions-of-china/areas.csv",
            "admin-divisions-of-china/streets.csv.xz",
        )
    ),
    "person": str(ROOT.parent / "shared/lexicons/thuocl/THUOCL_lishimingren.txt"),
    **{
        kind: str(ROOT.parent / "shared/lexicons/thuocl" / f"THUOCL_{name}")
        for kind, name in (
            ("it", "IT.txt.xz"),
            ("finance", "caijing.txt"),
            ("car", "car.txt"),
            ("food", "food.txt"),
            ("law", "law.txt.xz"),
            ("medicine", "medical.txt.xz"),
            ("animal", "animal.txt.xz"),
            ("idiom", "chengyu.txt"),
            ("poetry", "poem.txt.xz"),
        )
    },
}
INPUTS = ("wiki-words", "own-words", "jieba-words", "own-chars", "own-bigrams", "gazetteers")


def input_overrides(inputs: List[str], pretrained: Path, unit: bool = True) -> dict:
    """Config overrides for a combination of pretrained inputs (empty: the embedded defaults).

    unit (bool): The word and bigram tables at unit length (as msra.cfg has its
        words); False keeps them raw (on Weibo unit-length word vectors cost 2.2
        test F1, BENCHMARKS.md). The character table is at unit length either way
        (on Weibo that alone is within the seeds' spread, and on MSRA +3.3).
    """
    if not inputs:
        return {}
    lexicon: dict = {"@misc": "spacy-flat.jieba_lexicon.v1"}
    if "wiki-words" in inputs or "own-words" in inputs:
        path = LEXICONS["w2v"]["initialize.components.flat_ner.lexicon"]["path"]
        lexicon = {
            "@misc": "spacy-flat.word2vec_lexicon.v1",
            "path": path if "wiki-words" in inputs else str(pretrained / "words.vec"),
            "normalize": unit,
            "jieba_words": "jieba-words" in inputs,
        }
        if "wiki-words" in inputs and "own-words" in inputs:
            lexicon["extra_vectors"] = str(pretrained / "words.vec")
    if "gazetteers" in inputs:
        lexicon["gazetteers"] = GAZETTEERS
    out: dict = {"initialize.components.flat_ner.lexicon": lexicon}
    if "own-chars" in inputs:
        out["initialize.components.flat_ner.char_vectors"] = {
            "@misc": "spacy-flat.word2vec_char_vectors.v1",
            "path": str(pretrained / "chars.vec"),
            "normalize": True,
        }
        out["components.flat_ner.model.char_width"] = 50
    else:
        out["initialize.components.flat_ner.char_vectors"] = {
            "@misc": "spacy-flat.lac_char_vectors.v1",
            "normalize": True,
        }
    if "own-bigrams" in inputs:
        out["initialize.components.flat_ner.bigram_vectors"] = {
            "@misc": "spacy-flat.word2vec_bigram_vectors.v1",
            "path": str(pretrained / "bigrams.vec"),
            "normalize": unit,
        }
        out["components.flat_ner.model.bigram_vectors"] = True
    return out


def normalized(lexicon: Optional[str]) -> dict:
    """Overrides that scale the pretrained character (and word) vectors to unit length."""
    out: dict = {
        "initialize.components.flat_ner.char_vectors": {"@misc": "spacy-flat.lac_char_vectors.v1", "normalize": True}
    }
    if lexicon:
        out["initialize.components.flat_ner.lexicon"] = {
            **LEXICONS[lexicon]["initialize.components.flat_ner.lexicon"],
            "normalize": True,
        }
    return out


ABLATIONS = {
    "msm": {"components.flat_ner.model.mask_self_matched": True},
    "mld": {"components.flat_ner.model.max_distance": 10},
    "head": {"components.flat_ner.model.head_only": True},
}


RATE = "training.optimizer.learn_rate"


def scheduled(config: Path, train: Path, epochs: int, overrides: dict) -> dict:
    """The schedule overrides for `epochs` epochs of `train`, counted for the config with
    `overrides` applied (a batcher's size changes the batches an epoch), for the config's
    rate or for the one `overrides` put in its place (a whole [training.optimizer.learn_rate]
    block, e.g. {"@schedules": "spacy-flat.epoch_decay.v1", ...}), whose counted keys are
    then set inside that block (`overrides` is changed in place). Keys `overrides` sets
    itself, dotted or inside that block (total_steps, steps_per_epoch), win over the counted ones."""
    counted = schedule_for(apply_overrides(load_config(config), overrides), train, epochs)
    if RATE not in overrides:
        return counted
    inside = {k: v for k, v in counted.items() if k.startswith(f"{RATE}.")}
    overrides[RATE] = {**{k.rsplit(".", 1)[1]: v for k, v in inside.items()}, **overrides[RATE]}
    return {k: v for k, v in counted.items() if k not in inside}


def run(
    config: Path,
    data: Dict[str, Path],
    seed: int,
    epochs: int,
    extra: Optional[dict],
    out: Path,
    gpu_id: int = -1,
    resumable: bool = False,
) -> dict:
    overrides = {
        "paths.train": str(data["train"]),
        "paths.dev": str(data["dev"]),
        "system.seed": seed,
        "training.max_epochs": epochs,
        **(extra or {}),
    }
    start = time.perf_counter()
    if resumable:
        # Checkpoints in `out`: the same command run again goes on where a stopped run stood.
        out.parent.mkdir(parents=True, exist_ok=True)
        with (out.parent / f"{out.name}.log").open("a", encoding="utf8") as log:
            resumable_train(config, out, overrides=overrides, use_gpu=gpu_id, stdout=log, stderr=log)
    else:
        train(config, out, overrides=overrides, use_gpu=gpu_id)
    seconds = time.perf_counter() - start
    dev = json.loads((out / "model-best" / "meta.json").read_text())["performance"]["ents_f"]
    scores = evaluate(str(out / "model-best"), data["test"], out / "metrics", gpu_id=gpu_id)
    result = {
        "dev_f": 100 * dev,
        "test_f": 100 * scores["ents_f"],
        "train_s": seconds,
        "test_chars_per_s": scores["speed"]["chars_per_second"],
    }
    if (out / "model-best" / "flat_ner").exists():
        # The same model decoded without its entity-boundary rules: what the rules change.
        free = evaluate(
            str(out / "model-best"), data["test"], out / "metrics-free", boundary_rules=False, gpu_id=gpu_id
        )
        result["test_f_free"] = 100 * free["ents_f"]
    if resumable:
        # Batches an epoch: from a warm-up schedule's length, or an epoch schedule's own count.
        block = overrides.get(RATE)
        per_epoch = overrides.get(f"{RATE}.total_steps", 0) / max(1, epochs)
        per_epoch = per_epoch or overrides.get(f"{RATE}.steps_per_epoch", 0)
        per_epoch = per_epoch or (block.get("steps_per_epoch", 0) if isinstance(block, dict) else 0)
        curve = dev_curve(out, per_epoch)
        result["train_s"] = curve["seconds"]  # over every process of the run
        result["curve"] = curve["curve"]
    # One line per finished run, so a long benchmark cut short still leaves its figures.
    print(f"RESULT {config.name} seed={seed} {json.dumps(result)} {json.dumps(extra or {})}", flush=True)
    return result


def dev_curve(out: Path, per_epoch: float) -> dict:
    """Dev F1 at every evaluation of a resumable run, by epoch (from its newest checkpoint's state).

    per_epoch (float): Batches an epoch (the schedule's count; 0: from the epochs the run finished).
    """
    states = sorted(out.glob("checkpoints/step-*/state.json"), key=lambda p: int(p.parent.name.split("-")[1]))
    state = json.loads(states[-1].read_text(encoding="utf8"))
    epoch, steps = state["epoch"], state["loop"]["steps"]
    if not per_epoch:
        per_epoch = (steps - state["batches_in_epoch"]) / epoch if epoch else max(1, state["batches_in_epoch"])
    curve = [[round((step + 1) / per_epoch, 2), round(100 * score, 2)] for score, step in state["loop"]["results"]]
    return {"seconds": state["loop"]["seconds"], "curve": curve}


ARCHITECTURE_NAMES = {
    "flat": "FLAT",
    "dcsan": "DC-SAN",
    "tener": "TENER",
    "lattice-lstm": "Lattice LSTM",
    "news": "DC-SAN",
}


def seeds_figures(results: List[dict]) -> dict:
    """A result record's figures from runs over seeds (accuracy's shape in benchmarks/results.py)."""

    def of(key: str) -> dict:
        return over_seeds([r[key] for r in results])

    figures = {"test_f1": of("test_f"), "dev_f1": of("dev_f")}
    figures["train_s"] = {"median": round(statistics.median(r["train_s"] for r in results))}
    figures["train_s"]["per_seed"] = [round(r["train_s"]) for r in results]
    figures["test_chars_per_s"] = {"median": round(statistics.median(r["test_chars_per_s"] for r in results))}
    if all("test_f_free" in r for r in results):
        figures["test_f1_without_boundary_rules"] = of("test_f_free")
    if all("curve" in r for r in results):
        figures["dev_curve"] = [r["curve"] for r in results]
    return figures


def write_records(args: argparse.Namespace, config: Path, ours: List[dict], peer: List[dict], load: float) -> None:
    """The runs' figures as result records (benchmarks/results.py), one for flat_ner and one for the peer."""
    stem = config.stem
    name = stem.split("_", 1)[1] if "_" in stem else "flat"
    arch = slug(name)
    if args.inputs:
        inputs = "+".join(args.inputs) + ("-raw" if args.raw else "")
    else:
        inputs = (args.lexicon or "defaults") + ("-norm" if args.normalize else "")
    settings = [f"{k.rsplit('.', 1)[-1]}={v}" for k, v in (item.split("=", 1) for item in args.set)]
    extras = [args.ablation, "select-on-test" if args.select_on_test else "", "gpu" if args.gpu_id >= 0 else ""]
    # Any override (the model's or training's: batcher, schedule, optimizer) makes the config a variant.
    variant = bool(args.ablation or args.select_on_test or args.set)
    label = "embedded defaults" if inputs == "defaults" else inputs.replace("+", " + ")
    dataset = {"msra": "MSRA"}.get(args.dataset, args.dataset.capitalize())
    common = {"dataset": args.dataset, "load_before": load, "gpu_id": args.gpu_id, "out_dir": args.results}
    epochs = f"{args.epochs} epoch" + ("s" if args.epochs != 1 else "")
    if ours:
        seeds = "s" + "".join(str(s) for s in args.seeds)
        title = f"{dataset}, {ARCHITECTURE_NAMES.get(arch, arch)}, {label}, {epochs}"
        title += "".join(f", {x}" for x in [*settings, *extras] if x)
        setup = {
            "architecture": ARCHITECTURE_NAMES.get(arch, arch),
            "inputs": label,
            "epochs": args.epochs,
            "transformer": None,
            "kind": "variant" if variant else ("defaults" if inputs == "defaults" else "pretrained"),
            "config": f"configs/{config.name}",
        }
        rid = slug("accuracy", args.dataset, arch, inputs, f"{args.epochs}ep", seeds, *settings, *extras)
        record(rid, "accuracy", title, seeds_figures(ours), seeds=args.seeds, setup=setup, **common)
    if peer:
        peer_seeds = args.peer_seeds or args.seeds
        rid = slug("accuracy", args.dataset, "spacy-ner", f"{args.epochs}ep", "s" + "".join(map(str, peer_seeds)))
        setup = {"architecture": "spaCy ner", "inputs": "no vectors", "epochs": args.epochs, "kind": "peer"}
        title = f"{dataset}, spaCy's ner, {epochs}"
        record(rid, "accuracy", title, seeds_figures(peer), seeds=peer_seeds, setup=setup, **common)


def peer_config(path: Path, epochs: int) -> Path:
    spacy_ner_config(epochs).to_disk(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=sorted(PAPER))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--ablation", choices=sorted(ABLATIONS), default=None)
    parser.add_argument("--lexicon", choices=sorted(LEXICONS), default=None, help="instead of jieba's dict.txt")
    parser.add_argument(
        "--normalize", action="store_true", help="unit-length pretrained vectors (characters and lexicon words)"
    )
    parser.add_argument("--inputs", nargs="+", choices=INPUTS, default=[], help="pretrained inputs (INPUTS)")
    parser.add_argument(
        "--config", default=None, help="a config under configs/ (default: DATASET.cfg), e.g. resume_tener.cfg"
    )
    parser.add_argument("--raw", action="store_true", help="with --inputs: word and bigram tables raw, not unit length")
    parser.add_argument(
        "--pretrained", type=Path, default=ROOT / "training/pretrain/full", help="pretrain-vectors output"
    )
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=JSON", help="more config overrides for flat_ner")
    parser.add_argument(
        "--select-on-test", action="store_true", help="keep the best test F1 of all evaluations (not a valid selection)"
    )
    parser.add_argument("--peer", action="store_true", help="also train spaCy's ner on the same data")
    parser.add_argument("--peer-seeds", type=int, nargs="+", default=None, help="seeds for the peer (default: --seeds)")
    parser.add_argument("--peer-only", action="store_true", help="train only spaCy's ner (implies --peer)")
    parser.add_argument("--peer-set", nargs="+", default=[], metavar="KEY=JSON", help="config overrides for the peer")
    parser.add_argument("--gpu-id", type=int, default=-1, help="train and evaluate on this GPU")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="keep each run in OUTPUT/flatSEED with checkpoints (python -m spacy_flat train): the same command "
        "run again goes on from where a stopped run stood (default: a temporary folder, spacy train)",
    )
    results_option(parser)
    args = parser.parse_args()
    load = round(os.getloadavg()[0], 2)
    data = splits(args.dataset)
    if args.select_on_test:
        data["dev"] = data["test"]
    config = ROOT / "configs" / (args.config or f"{args.dataset}.cfg")
    if not config.exists():
        config = ROOT / "configs" / "resume.cfg"
    rows: List[List[str]] = []
    ours: List[dict] = []
    peer: List[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        tmp = str(args.output) if args.output else scratch
        lexicon = "shared w2v lexicon (125,796 words, 100d vectors)" if args.lexicon else "jieba lexicon"
        settings = dict(item.split("=", 1) for item in args.set)
        label = f"flat_ner, {lexicon} + LAC chars{f' ({args.ablation})' if args.ablation else ''}"
        label += ", unit-length vectors" if args.normalize else ""
        label += ", best test F1 over evaluations (not a valid selection)" if args.select_on_test else ""
        label += "".join(f", {k.rsplit('.', 1)[-1]}={v}" for k, v in settings.items())
        if args.inputs:
            label = f"flat_ner, {' + '.join(args.inputs)} ({'raw' if args.raw else 'unit-length'} words and bigrams)"
        if args.config:
            label = f"{label}, configs/{args.config}"
        overrides = {k: json.loads(v) for k, v in settings.items()}
        # The config's schedule is for its own max_epochs; a shorter run decays to zero at its own end.
        schedule = scheduled(config, data["train"], args.epochs, overrides)
        extra = {
            **schedule,
            **ABLATIONS.get(args.ablation or "", {}),
            **LEXICONS.get(args.lexicon or "", {}),
            **(normalized(args.lexicon) if args.normalize else {}),
            **input_overrides(args.inputs, args.pretrained, unit=not args.raw),
            **overrides,
        }
        if not args.peer_only:
            resumable = args.output is not None
            ours = [
                run(config, data, s, args.epochs, extra, Path(tmp) / f"flat{s}", args.gpu_id, resumable)
                for s in args.seeds
            ]
            rows.append(seeds_row(label, ours))
            free = [{**r, "test_f": r["test_f_free"]} for r in ours if "test_f_free" in r]
            if free:
                rows.append(seeds_row(f"{label}, the same models without boundary rules", free))
        if args.peer or args.peer_only:
            cfg = peer_config(Path(tmp) / "peer.cfg", args.epochs)
            peer_extra = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.peer_set)}
            peer_seeds = args.peer_seeds or args.seeds
            peer = [run(cfg, data, s, args.epochs, peer_extra, Path(tmp) / f"peer{s}", args.gpu_id) for s in peer_seeds]
            rows.append(seeds_row("spaCy ner (--optimize accuracy, no vectors)", peer))
    print(f"Machine: {machine()}\n\nDataset: {args.dataset}, {args.epochs} epochs max, seeds {args.seeds}\n")
    print(markdown_table(SEEDS_COLUMNS, rows + paper_rows(PAPER[args.dataset], len(SEEDS_COLUMNS), 1)))
    write_records(args, config, ours, peer, load)


if __name__ == "__main__":
    main()
