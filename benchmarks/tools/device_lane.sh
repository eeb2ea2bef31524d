#!/usr/bin/env bash
# The GPU lane and GPU benchmarks on a GPU machine that has PyTorch and CUDA but no package
# registry: the other packages travel as an unpacked site folder (.devdata/devsite.tar.xz, made by
# `bash benchmarks/tools/device_site.sh`), with corpus/bench (the benchmarks' DocBins) carried beside the checkout.
#   bash benchmarks/tools/device_lane.sh tests family profile   # decoding on the device: about 6 minutes on one H100/H200
#   bash benchmarks/tools/device_lane.sh tests            # tests/test_gpu.py --rungpu (each test's time: --durations)
#   bash benchmarks/tools/device_lane.sh family           # benchmarks/family.py on the GPU: Resume's test set pooled to 1,600
#       docs (MSRA's first 1,600), batch 1 (first 100 docs), 64 and 256, medians of 5 rounds, beside FLAT trained
#       300 steps on Resume in the lane (decoding on the device and NumPy); inference and training, no memory part;
#       its record (speed-gpu-family) to $OUT
#   bash benchmarks/tools/device_lane.sh profile          # where nlp.pipe's time goes on the GPU (profile_inference.py): the
#       trained FLAT (the family part's, else trained here), device and NumPy decoding at batch 1, 64 and 256 over
#       512 docs; its record (speed-gpu-profile-resume) to $OUT
#   bash benchmarks/tools/device_lane.sh training         # a cold and a warm training epoch through the real loop
#       (benchmarks/training_speed.py), FLAT and DC-SAN: Resume whole, MSRA's 4,000 sentences scaled; beside the
#       commit before the training-speed work where .devdata/base-8517047.tar.xz is carried (`git archive 8517047
#       spacy_flat configs | xz > .devdata/base-8517047.tar.xz`): about 2 minutes alone, 5 with the baseline;
#       its record (speed-training-gpu) to $OUT
#   bash benchmarks/tools/device_lane.sh training-bf16    # the same epochs under bfloat16 autocast (mixed_precision_dtype), no
#       baseline: about 2 minutes; its record to $OUT/bf16
#   (the groups, memory and lattice parts of 0.2.0 ran settled experiments: benchmarks/archive/DECISIONS.md names their commit)
#   MSRA_EPOCHS=5 bash benchmarks/tools/device_lane.sh msra # FLAT and DC-SAN on MSRA, 3 seeds each, all at once on one GPU
# LANE_DEVICE=cpu: a dry run of tests, family, profile and training on a machine without CUDA (the installed environment, one
# thread, tiny sizes, the CPU side of the device tests): every command line runs, nothing is measured.
#   LANE_DEVICE=cpu OUT=/tmp/lane-dry bash benchmarks/tools/device_lane.sh tests family profile training training-bf16
# Each part's seconds and exit status go to $OUT/lane_times.txt. tests, family and profile stop (SIGINT, exit 124)
# where the lane has run LANE_SECONDS (default 450 on a GPU, 900 in the dry run; cold start included), so that the
# lane ends in time even where a part runs long: a part stopped so writes no record.
set -uo pipefail
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
DEVICE=${LANE_DEVICE:-gpu}
# The trained FLAT that family saves and profile reuses, in this run's own folder.
WORK=${LANE_WORK:-$(mktemp -d /tmp/lane.XXXXXX)}
export PYTHONUNBUFFERED=1 LANE_DEVICE="$DEVICE"
if [ "$DEVICE" = cpu ]; then
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  GPU=-1 STEPS=20 LANE_SECONDS=${LANE_SECONDS:-900}
  FAMILY_SIZES=(--docs 600 --pool --b1-docs 8 --repeats 1 --batches 2 --parts inference training memory
    --trained-decodings torch numpy)
  PROFILE_SIZES=(--docs 500 --pool --batch-sizes 8 64 --decodings torch numpy)
  TRAINING_SIZES=(--threads 1 --sentences resume=40 msra=40)
  python3 -c "import torch, spacy, thinc, spacy_flat; print('dry run on the CPU: torch', torch.__version__, 'spacy', spacy.__version__, 'thinc', thinc.__version__)"
else
  GPU=0 STEPS=300 LANE_SECONDS=${LANE_SECONDS:-450}
  FAMILY_SIZES=(--docs 1600 --pool --b1-docs 100 --repeats 5 --large-batch 256 --parts inference training)
  PROFILE_SIZES=(--docs 512 --pool --batch-sizes 1 64 256 --decodings auto numpy)
  TRAINING_SIZES=(--sentences msra=4000)
  if [ ! -d /tmp/devsite ]; then
    tar xJf .devdata/devsite.tar.xz -C /tmp
    PYTHONPATH=/tmp/devsite python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 \
      || { cat "$OUT/install.log"; exit 1; }
  fi
  export PYTHONPATH=/tmp/devsite
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, spacy, thinc, cupy, spacy_flat; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'spacy', spacy.__version__, 'thinc', thinc.__version__, 'cupy', cupy.__version__, torch.cuda.is_available())"
fi
failed=0
for part in "$@"; do
  start=$SECONDS
  if [ "$DEVICE" = cpu ] && [[ ! "$part" =~ ^(tests|family|profile|training|training-bf16)$ ]]; then
    echo "part $part has no dry run"; exit 2
  fi
  left=$((LANE_SECONDS - SECONDS))
  if [[ "$part" =~ ^(tests|family|profile|training|training-bf16)$ ]] && [ "$left" -le 0 ]; then
    echo "part $part: not run, the lane's $LANE_SECONDS s are spent" | tee -a "$OUT/lane_times.txt"; failed=1; continue
  fi
  case "$part" in
    tests)
      timeout -s INT -k 15 "$left" python3 -m pytest tests/test_gpu.py --rungpu -q -p no:cacheprovider -rs \
        --durations=12 2>&1 | tee "$OUT/gpu_tests.log" ;;
    family)
      timeout -s INT -k 15 "$left" python3 benchmarks/family.py --gpu-id "$GPU" "${FAMILY_SIZES[@]}" \
        --trained-steps "$STEPS" --trained-dir "$WORK/flat-resume-$STEPS" --allow-busy --results "$OUT" 2>&1 \
        | tee "$OUT/family_$DEVICE.log" ;;
    training)
      base=()
      if [ -f .devdata/base-8517047.tar.xz ]; then
        mkdir -p "$WORK/base-8517047" && tar xJf .devdata/base-8517047.tar.xz -C "$WORK/base-8517047"
        base=(--baseline-path "$WORK/base-8517047")
      fi
      timeout -s INT -k 15 "$left" python3 benchmarks/training_speed.py resume msra --architectures flat dcsan \
        --gpu-id "$GPU" "${TRAINING_SIZES[@]}" "${base[@]}" --allow-busy --results "$OUT" 2>&1 \
        | tee "$OUT/training_$DEVICE.log" ;;
    training-bf16)
      mkdir -p "$OUT/bf16"
      timeout -s INT -k 15 "$left" python3 benchmarks/training_speed.py resume msra --architectures flat dcsan \
        --gpu-id "$GPU" "${TRAINING_SIZES[@]}" --allow-busy --results "$OUT/bf16" --override \
        components.flat_ner.model.mixed_precision=true 'components.flat_ner.model.mixed_precision_dtype="bfloat16"' 2>&1 \
        | tee "$OUT/training_bf16_$DEVICE.log" ;;
    profile)
      timeout -s INT -k 15 "$left" python3 benchmarks/tools/profile_inference.py resume --gpu-id "$GPU" \
        "${PROFILE_SIZES[@]}" --train-steps "$STEPS" --model "$WORK/flat-resume-$STEPS" --results "$OUT" 2>&1 \
        | tee "$OUT/profile_$DEVICE.log" ;;
    msra)
      epochs=${MSRA_EPOCHS:?set MSRA_EPOCHS}
      # Six trainings share the GPU; two CPU threads each on the machine's 16 cores.
      for config in msra.cfg msra_dcsan.cfg; do
        for seed in 0 1 2; do
          OMP_NUM_THREADS=2 python3 benchmarks/accuracy.py msra --seeds $seed --epochs "$epochs" --config $config \
            --gpu-id 0 >"$OUT/msra_${config%.cfg}_$seed.log" 2>&1 &
        done
      done
      wait
      grep -h "^RESULT" "$OUT"/msra_*.log ;;
    *) echo "unknown part: $part"; exit 2 ;;
  esac
  status=$?
  [ "$status" = 0 ] || failed=1
  echo "part $part: $((SECONDS - start)) s, exit $status" | tee -a "$OUT/lane_times.txt"
done
exit $failed
