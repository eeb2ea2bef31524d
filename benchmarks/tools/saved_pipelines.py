"""Check that pipelines saved by earlier releases still load and predict the same.

Each reference commit (0.2.0 at f95fa10, whose only architecture is FLAT and which computes no entity
probabilities; the family's four architectures at 0e69da2) is checked out in a git worktree, and under its
own code a small pipeline of every architecture it registers is trained at the architecture's default
settings on tests/data/tiny.jsonl, saved, and run on fixed probe texts:

    python benchmarks/tools/saved_pipelines.py save --out training/saved-pipelines \
        [--commits f95fa10 0e69da2] [--steps 40]

writes OUT/<commit>/<architecture> (the pipeline) and OUT/<commit>/<architecture>.expected.json (its entities and,
where the commit computes them, their probabilities, with the commit, the model's config and the command).

    python benchmarks/tools/saved_pipelines.py compare training/saved-pipelines [--code DIR]

loads every saved pipeline under the installed package, or under the checkout DIR, predicts the probe texts
again and prints a row per pipeline: entities must be identical and probabilities within 1e-5. It exits 1 if a
pipeline fails to load or differs.
"""

import argparse
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny.jsonl"
WORKTREES = Path(tempfile.gettempdir()) / "saved-pipelines-worktrees"
COMMITS = ["f95fa10", "0e69da2"]
ARCHITECTURES = [
    "spacy-flat.FlatTagger.v1",
    "spacy-flat.TenerTagger.v1",
    "spacy-flat.DcsanTagger.v1",
    "spacy-flat.LatticeLstmTagger.v1",
]
TOLERANCE = 1e-5
# The tests' small lexicon (tests/util.py's SMALL_WORDS), read from its file rather than imported: the
# children run other commits' code, and importing tests/util.py would import this checkout's package beside
# it. A small lexicon keeps the pipelines small and fast to train.
SMALL_WORDS = (ROOT / "tests" / "data" / "small_words.txt").read_text(encoding="utf8").split()
UNSEEN = [
    "王芳和李娜在上海的复旦大学见面。",
    "今天和@小明同学去了上海迪士尼 太开心了哈哈哈 #周末#",
    "習近平在北京人民大會堂會見了美國國務卿布林肯。",
    "张伟毕业于北京大学，现在在上海的华为公司工作。" * 40,  # longer than the 512-character window
    "",
    "Hello张伟2024年在北京😀",
]


def tiny_records() -> List[dict]:
    return [json.loads(line) for line in TINY.read_text(encoding="utf8").splitlines() if line.strip()]


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def code_version(code: Path) -> str:
    """RETURNS (str): The checkout's short commit, with -dirty if its tree has changes."""
    try:
        dirty = git("status", "--porcelain", "--untracked-files=no", cwd=code)
        return git("rev-parse", "--short", "HEAD", cwd=code) + ("-dirty" if dirty else "")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "not a git checkout"


def worktree(commit: str) -> Path:
    """A detached worktree of `commit` under WORKTREES, reused when it is already there at that commit."""
    full = git("rev-parse", "--verify", f"{commit}^{{commit}}")
    path = WORKTREES / git("rev-parse", "--short", full)
    if not path.exists():
        git("worktree", "add", "--detach", str(path), full)
    elif git("rev-parse", "HEAD", cwd=path) != full:
        sys.exit(f"{path} is not at {commit}: remove it (git worktree remove {path}) or check it out there")
    return path


def run_child(code: Optional[Path], args: List[str]) -> None:
    """Run this script's `args` in a child whose `import spacy_flat` is the code of `code` (None: the installed
    package's). The checkout's own entry points come from an egg-info built in a scratch folder: the installed
    distribution's would name its modules, which the editable finder then imports from the installed tree."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="saved-pipelines-metadata-") as metadata:
        if code is not None:
            built = subprocess.run(
                [sys.executable, "setup.py", "-q", "egg_info", "--egg-base", metadata],
                cwd=code,
                capture_output=True,
                text=True,
            )
            if built.returncode != 0:
                sys.exit(f"egg_info failed in {code}:\n{built.stderr}")
            env["PYTHONPATH"] = os.pathsep.join([metadata, str(code)])
        subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], cwd=code, env=env, check=True)


def isolate(code: Optional[Path]) -> None:
    """Make `import spacy_flat` the code of `code` alone, and say whose code it is; exit if it is not."""
    if code is not None:
        # The editable install's finder, last on sys.meta_path, would supply modules the checkout lacks.
        sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    import torch

    import spacy_flat

    # Threads split torch's reductions differently, which moves probabilities in their last bits.
    torch.set_num_threads(1)
    print(f"spacy_flat {spacy_flat.__version__} from {spacy_flat.__file__}", flush=True)
    check_modules(code)


def check_modules(code: Optional[Path]) -> None:
    if code is None:
        return
    stray = sorted(
        name
        for name, module in list(sys.modules.items())
        if name.split(".")[0] == "spacy_flat"
        and not Path(getattr(module, "__file__", None) or "/").resolve().is_relative_to(code)
    )
    if stray:
        sys.exit(f"spacy_flat modules not from {code}: {', '.join(stray)}")


def predict(nlp: Any, texts: List[str]) -> List[Dict[str, Any]]:
    """RETURNS: per text, its entities [start_char, end_char, label] and their probabilities (None where the
    code computes none: 0.2.0, or a component whose scores_key is null)."""
    key = nlp.get_pipe("flat_ner").cfg.get("scores_key")
    found = []
    for text in texts:
        doc = nlp(text)
        scores = doc.spans[key].attrs.get("scores") if key and key in doc.spans else None
        ents = [[ent.start_char, ent.end_char, ent.label_] for ent in doc.ents]
        found.append({"entities": ents, "probabilities": None if scores is None else [float(p) for p in scores]})
    return found


def train(architecture: str, steps: int) -> Tuple[Any, Optional[float]]:
    """A pipeline of `architecture` at its default settings, as tests/util.py's build_family trains one.
    RETURNS: the pipeline and its last loss."""
    import spacy
    from spacy.training import Example
    from spacy.util import fix_random_seed

    import spacy_flat

    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config={"model": {"@architectures": architecture}})
    examples = []
    for rec in tiny_records():  # the corpus's ends are inclusive
        spans = [(s, e + 1, label) for label, surf in rec["label"].items() for pos in surf.values() for s, e in pos]
        examples.append(Example.from_dict(nlp.make_doc(rec["text"]), {"entities": spans}))
    # Both commits take a lexicon loader, and default to jieba's LAC character table.
    ner.initialize(lambda: examples, nlp=nlp, lexicon=lambda: spacy_flat.Lexicon(SMALL_WORDS))
    optimizer = nlp.create_optimizer()
    losses: Dict[str, float] = {}
    for _ in range(steps):
        losses = nlp.update(examples, sgd=optimizer)
    return nlp, losses.get("flat_ner")


def train_child(args: argparse.Namespace) -> None:
    code = Path(args.code).resolve()
    isolate(code)
    import spacy
    from catalogue import RegistryError
    from spacy.util import registry

    import spacy_flat

    out = Path(args.out)
    texts = [rec["text"] for rec in tiny_records()] + UNSEEN
    for architecture in ARCHITECTURES:
        try:
            registry.architectures.get(architecture)
        except RegistryError:  # not at this commit
            continue
        start = time.perf_counter()
        nlp, loss = train(architecture, args.steps)
        name = architecture.removeprefix("spacy-flat.")
        shutil.rmtree(out / name, ignore_errors=True)
        nlp.to_disk(out / name)
        found = predict(nlp, texts)
        n_ents = sum(len(f["entities"]) for f in found)
        if not n_ents:  # nothing to compare
            sys.exit(f"{architecture} predicts no entity on the probe texts after {args.steps} steps: raise --steps")
        expected = {
            "commit": args.commit,
            "saved_by": code_version(code),
            "spacy_flat": spacy_flat.__version__,
            "spacy": spacy.__version__,
            "architecture": architecture,
            "model": dict(nlp.config["components"]["flat_ner"]["model"]),
            "steps": args.steps,
            "loss": loss,
            "command": args.command,
            "texts": [{"text": text, **f} for text, f in zip(texts, found)],
        }
        (out / f"{name}.expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1), encoding="utf8")
        seconds = time.perf_counter() - start
        print(f"{args.commit[:7]} {architecture}: {n_ents} entities on {len(texts)} texts, {seconds:.1f} s", flush=True)
    check_modules(code)


class Caught(logging.Handler):
    """Log records at WARNING and above, as text."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"log {record.name}: {record.getMessage()}")


def check(path: Path) -> Dict[str, Any]:
    """Load the pipeline beside `path` (an .expected.json), predict its texts and compare. RETURNS: its row."""
    import spacy

    expected = json.loads(path.read_text(encoding="utf8"))
    wanted = expected["texts"]
    row: Dict[str, Any] = {"commit": expected["commit"], "architecture": expected["architecture"]}
    row.update(texts=len(wanted), expected=sum(len(t["entities"]) for t in wanted), differs=[])
    caught = Caught()
    loggers = [logging.getLogger(name) for name in ("", "spacy", "spacy_flat")]
    for logger in loggers:
        logger.addHandler(caught)
    try:
        with warnings.catch_warnings(record=True) as raised:
            warnings.simplefilter("always")
            nlp = spacy.load(path.parent / path.name.removesuffix(".expected.json"))
            found = predict(nlp, [t["text"] for t in wanted])
    except Exception as error:
        lines = [line[:200] for line in str(error).splitlines() if line.strip()][:6]  # config errors run long
        row["error"] = f"{type(error).__name__}: " + " | ".join(lines)
        found = []
    finally:
        for logger in loggers:
            logger.removeHandler(caught)
    row["warnings"] = list(dict.fromkeys(caught.lines + [f"{w.category.__name__}: {w.message}" for w in raised]))
    if "error" in row:
        return row
    row["found"] = sum(len(f["entities"]) for f in found)
    row["max_gap"] = None  # None: nothing to compare (0.2.0 computes no probabilities)
    for want, got in zip(wanted, found):
        if want["entities"] != got["entities"]:
            row["differs"].append({"text": want["text"][:40], "expected": want["entities"], "found": got["entities"]})
        elif want["probabilities"] is not None and got["probabilities"] is not None:
            gaps = [abs(p - q) for p, q in zip(want["probabilities"], got["probabilities"])]
            row["max_gap"] = max([row["max_gap"] or 0.0, *gaps])
    if row["max_gap"] is None and any(got["probabilities"] for got in found):
        row["notes"] = ["entity probabilities computed here, none saved with the pipeline to compare"]
    return row


def compare_child(args: argparse.Namespace) -> None:
    code = Path(args.code).resolve() if args.code else None
    isolate(code)
    import spacy_flat

    rows = [check(path) for path in sorted(Path(args.saved).glob("*/*.expected.json"))]
    check_modules(code)
    source = Path(spacy_flat.__file__).resolve().parents[1]
    result = {"code": str(source), "version": code_version(source), "spacy_flat": spacy_flat.__version__, "rows": rows}
    Path(args.result).write_text(json.dumps(result, ensure_ascii=False), encoding="utf8")


def save(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    command = shlex.join(["python", "benchmarks/tools/saved_pipelines.py", *sys.argv[1:]])
    for commit in args.commits:
        code = worktree(commit)
        out = Path(args.out).resolve() / code.name
        out.mkdir(parents=True, exist_ok=True)
        child = ["_train-child", "--code", str(code), "--out", str(out), "--steps", str(args.steps)]
        run_child(code, [*child, "--commit", git("rev-parse", "HEAD", cwd=code), "--command", command])
    print(f"saved in {time.perf_counter() - start:.0f} s to {args.out}")


def compare(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    code = Path(args.code).resolve() if args.code else None
    with tempfile.TemporaryDirectory() as scratch:
        result_path = Path(scratch) / "result.json"
        child = ["_compare-child", "--saved", str(Path(args.saved).resolve()), "--result", str(result_path)]
        run_child(code, [*child, *(["--code", str(code)] if code else [])])
        result = json.loads(result_path.read_text(encoding="utf8"))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"code: {result['code']} at {result['version']} (spacy-flat {result['spacy_flat']}); load average {load}")
    header = ["commit", "architecture", "texts", "expected", "found", "equal", "max |dp|", "warnings", "result"]
    widths = [8, 32, 5, 8, 5, 5, 9, 8, 6]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    failed = False
    for row in result["rows"]:
        equal = "error" not in row and not row["differs"]
        gap = row.get("max_gap")
        ok = equal and (gap is None or gap <= TOLERANCE)
        failed |= not ok
        cells = [row["commit"][:7], row["architecture"], row["texts"], row["expected"], row.get("found", "-")]
        cells += ["yes" if equal else "no", "-" if gap is None else f"{gap:.1e}", len(row["warnings"])]
        print("  ".join(str(c).ljust(w) for c, w in zip([*cells, "pass" if ok else "FAIL"], widths)))
    for row in result["rows"]:  # what failed, and what loading said
        details = [
            row.get("error"),
            *row["warnings"],
            *row.get("notes", []),
            *(json.dumps(d, ensure_ascii=False) for d in row["differs"]),
        ]
        for line in filter(None, details):
            print(f"  {row['commit'][:7]} {row['architecture']}: {line}")
    print(f"compared {len(result['rows'])} pipelines in {time.perf_counter() - start:.0f} s")
    if failed or not result["rows"]:
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="subcommand", required=True, metavar="{save,compare}")
    p = commands.add_parser("save", help="train and save a pipeline of each architecture at each commit")
    p.add_argument("--out", default="training/saved-pipelines")
    p.add_argument("--commits", nargs="+", default=COMMITS)
    p.add_argument("--steps", type=int, default=40, help="nlp.update steps on the tiny corpus")
    p.set_defaults(func=save)
    p = commands.add_parser("compare", help="load the saved pipelines under a checkout's code and compare")
    p.add_argument("saved")
    p.add_argument("--code", help="a checkout whose code loads them (default: the installed package)")
    p.set_defaults(func=compare)
    # The children: one process per commit's code.
    p = commands.add_parser("_train-child")
    for flag in ("--code", "--out", "--commit", "--command"):
        p.add_argument(flag, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.set_defaults(func=train_child)
    p = commands.add_parser("_compare-child")
    p.add_argument("--saved", required=True)
    p.add_argument("--result", required=True)
    p.add_argument("--code")
    p.set_defaults(func=compare_child)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
