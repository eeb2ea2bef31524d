#!/usr/bin/env bash
# flat_ner's CPU inference speed (benchmarks/speed.py, one thread, batch 64) at this checkout and at an
# earlier commit, in alternating processes, so that a drift in the machine's speed reaches both alike.
#   bash benchmarks/tools/speed_ab.sh REV MODEL [ROUNDS]
# REV is checked out in a temporary worktree and runs in a virtual environment of its own (torch and REV's
# package; BASE_VENV=DIR reuses one made for REV): this checkout's installed entry points name modules that
# REV may lack, so REV cannot share this environment. MODEL is a trained pipeline that both load: one saved by REV (this
# checkout loads pipelines saved by 0.2.0 and later), or by this checkout, with the settings REV does not know
# left out. Each process times flat_ner beside spaCy's ner (speed.py's rounds); the lines kept are speed.py's
# table rows, each prefixed with the commit it ran.
set -euo pipefail
rev=${1:?REV}; model=$(realpath "${2:?MODEL}"); rounds=${3:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach -q "$work/base" "$rev"
ln -s "$root/corpus" "$work/base/corpus"
venv=${BASE_VENV:-$work/venv}
if [ ! -x "$venv/bin/python" ]; then
  python -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet torch=="$(python -c 'import torch; print(torch.__version__.split("+")[0])')"
  "$venv/bin/python" -m pip install --quiet -e "$work/base"
fi
(cd "$work/base" && PYTHONPATH="$work/base" "$venv/bin/python" -c \
  "import spacy_flat, sys; sys.exit(not spacy_flat.__file__.startswith('$work/base/'))") ||
  { echo "REV's environment does not import REV's package" >&2; exit 1; }
cp -r "$model" "$work/model"
# Settings added after REV, which its factory and architectures would refuse.
sed -i '/^decoding = /d;/^int8_inference = /d;/^skip_spaces = /d' "$work/model/config.cfg"
here=$(git -C "$root" rev-parse --short HEAD)
base=$(git -C "$work/base" rev-parse --short HEAD)
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
uptime
for round in $(seq "$rounds"); do
  for side in base head; do
    if [ "$side" = base ]; then dir="$work/base" m="$work/model" c=$base py="$venv/bin/python"
    else dir="$root" m="$model" c=$here py=python; fi
    (cd "$dir" && PYTHONPATH="$dir" "$py" benchmarks/speed.py --parts inference --model "$m" --batch-size 64 \
      --docs 400 --repeats 1 --allow-busy --results none) \
      | grep -E '^\| (resume|msra)' | sed "s/^/$c round $round /"
  done
done
uptime
