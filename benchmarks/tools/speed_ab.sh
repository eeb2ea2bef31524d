#!/usr/bin/env bash
# flat_ner's CPU inference speed (benchmarks/speed.py, one thread, batch 64) at this checkout and at an
# earlier commit, in alternating processes, so that a drift in the machine's speed reaches both alike.
#   bash benchmarks/tools/speed_ab.sh REV MODEL [ROUNDS]
# REV is checked out in a temporary worktree; MODEL is a trained pipeline (copied for REV with the
# settings REV does not know left out). Each process times flat_ner beside spaCy's ner (speed.py's rounds);
# the lines kept are speed.py's table rows, each prefixed with the commit it ran.
set -euo pipefail
rev=${1:?REV}; model=${2:?MODEL}; rounds=${3:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach -q "$work/base" "$rev"
ln -s "$root/corpus" "$work/base/corpus"
cp -r "$model" "$work/model"
# Settings added after REV, which its factory and architectures would refuse.
sed -i '/^decoding = /d;/^int8_inference = /d' "$work/model/config.cfg"
here=$(git -C "$root" rev-parse --short HEAD)
base=$(git -C "$work/base" rev-parse --short HEAD)
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
for round in $(seq "$rounds"); do
  for side in base head; do
    if [ "$side" = base ]; then dir="$work/base" m="$work/model" c=$base; else dir="$root" m="$model" c=$here; fi
    (cd "$dir" && PYTHONPATH="$dir" python benchmarks/speed.py --parts inference --model "$m" --batch-size 64 \
      --docs 400 --repeats 1 --allow-busy --results none) \
      | grep -E '^\| (resume|msra)' | sed "s/^/$c round $round /"
  done
done
