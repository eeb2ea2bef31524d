#!/usr/bin/env bash
# Packs this environment's non-PyTorch dependencies as a Python 3.12 site folder for a GPU machine that has
# Python 3.12, PyTorch, cupy, pytest and hypothesis but no package index.
# Stripped of tests, debug symbols and jieba's unused POS and keyword data to keep the archive small (64 MiB).
#   bash benchmarks/tools/device_site.sh                  # spaCy, thinc, jieba and the rest of the core install
#   bash benchmarks/tools/device_site.sh --transformers   # also spacy-transformers and the transformers release it
#                                                   # accepts (that image's transformers is too new for it)
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl .devdata
platforms="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
pins=$(python -m pip list --format=freeze | grep -iE '^(spacy|thinc|blis|cymem|preshed|murmurhash|srsly|pydantic|pydantic_core|pyahocorasick|catalogue|confection|wasabi|weasel|spacy-legacy|spacy-loggers|cloudpathlib|annotated-types|typing-inspection|pytorch-crf)==')
if [ "${1:-}" = "--transformers" ]; then
  pins="$pins $(python -m pip list --format=freeze | grep -iE '^(spacy-transformers|spacy-alignments|transformers|tokenizers|huggingface[-_]hub)==')"
fi
# shellcheck disable=SC2086
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $platforms -d .whl $pins
rm -rf /tmp/devsite
# shellcheck disable=SC2086
python -m pip install -q --no-deps --no-index --no-compile --target /tmp/devsite --python-version 3.12 \
  --only-binary=:all: --implementation cp $platforms .whl/*.whl
jieba=$(python -c "import jieba, os; print(os.path.dirname(jieba.__file__))")
cp -r "$jieba" "$(dirname "$jieba")"/jieba-*.dist-info /tmp/devsite/
rm -rf /tmp/devsite/jieba/posseg /tmp/devsite/jieba/analyse /tmp/devsite/spacy/tests /tmp/devsite/thinc/tests /tmp/devsite/bin
find /tmp/devsite -name __pycache__ -prune -exec rm -rf {} +
find /tmp/devsite -name "*.so" -exec strip --strip-unneeded {} \;
tar cf - -C /tmp devsite | xz -T2 -6 >.devdata/devsite.tar.xz
ls -la .devdata/devsite.tar.xz
