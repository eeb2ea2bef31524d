#!/usr/bin/env bash
# The GPU lane and GPU benchmarks on a GPU machine that has PyTorch and CUDA but no package
# registry: the other packages travel as an unpacked site folder (.devdata/devsite.tar.xz, made by
# `bash benchmarks/device_site.sh`), with corpus/bench (the benchmarks' DocBins) carried beside the checkout.
#   bash benchmarks/device_lane.sh tests            # tests/test_gpu.py --rungpu
#   bash benchmarks/device_lane.sh family           # benchmarks/family.py on the GPU (batch 1, 64, 256; its record to $OUT)
#   bash benchmarks/device_lane.sh groups           # device against CPU prediction groups (benchmarks/device_groups.py)
#   bash benchmarks/device_lane.sh profile          # where nlp.pipe's time goes on the GPU (profile_inference.py)
#   bash benchmarks/device_lane.sh memory           # CUDA memory of one full prediction group (group_memory.py)
#   bash benchmarks/device_lane.sh lattice          # Lattice LSTM training against the released design, both on the GPU
#   MSRA_EPOCHS=5 bash benchmarks/device_lane.sh msra # FLAT and DC-SAN on MSRA, 3 seeds each, all at once on one GPU
#   TEACHER_DATASET=resume TEACHER_EPOCHS=6 bash benchmarks/device_lane.sh teacher
#       FLAT on m3e-small (configs/resume_trf.cfg) as a distillation teacher, trained on the GPU from the
#       half-precision copy in .devdata/m3e-small (benchmarks/device_model.py pack-hf, carried), resumable in
#       training/teach/DATASET_trf_gpu; model-best comes back in parts under $OUT/teacherSEED, its record in $OUT
#       (the site folder must hold the transformer packages: device_site.sh --transformers)
set -uo pipefail
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
if [ ! -d /tmp/devsite ]; then
  tar xJf .devdata/devsite.tar.xz -C /tmp
  PYTHONPATH=/tmp/devsite python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 \
    || { cat "$OUT/install.log"; exit 1; }
fi
export PYTHONPATH=/tmp/devsite PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, spacy, thinc, cupy, spacy_flat; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'spacy', spacy.__version__, 'thinc', thinc.__version__, 'cupy', cupy.__version__, torch.cuda.is_available())"
for part in "$@"; do
  case "$part" in
    tests)
      python3 -m pytest tests/test_gpu.py --rungpu -q -p no:cacheprovider -rs 2>&1 | tee "$OUT/gpu_tests.log" ;;
    family)
      python3 benchmarks/family.py --gpu-id 0 --docs 400 --repeats 3 --large-batch 256 --allow-busy --results "$OUT" \
        2>&1 | tee "$OUT/family_gpu.log" ;;
    groups)
      python3 benchmarks/device_groups.py --gpu-id 0 --architectures FLAT "Lattice LSTM" 2>&1 | tee "$OUT/groups_gpu.log" ;;
    memory)
      python3 benchmarks/group_memory.py --gpu-id 0 --architectures FLAT "Lattice LSTM" 2>&1 | tee "$OUT/memory_gpu.log" ;;
    lattice)
      python3 benchmarks/lattice_lstm_speed.py resume --sentences 400 --rounds 3 --sizes 1000 3000 --gpu-id 0 \
        --results "$OUT" 2>&1 | tee "$OUT/lattice_gpu.log" ;;
    profile)
      python3 benchmarks/profile_inference.py resume --gpu-id 0 --batch-sizes 1 64 256 2>&1 | tee "$OUT/profile_gpu.log" ;;
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
    teacher)
      dataset=${TEACHER_DATASET:?set TEACHER_DATASET}
      epochs=${TEACHER_EPOCHS:?set TEACHER_EPOCHS}
      seeds=${TEACHER_SEEDS:-0}
      # shellcheck disable=SC2086
      python3 benchmarks/transformer.py "$dataset" --epochs "$epochs" --seeds $seeds --skip-peer --gpu-id 0 \
        --model .devdata/m3e-small --output "training/teach/${dataset}_trf_gpu" --results "$OUT" \
        2>&1 | tee "$OUT/teacher_$dataset.log"
      for seed in $seeds; do
        python3 benchmarks/device_model.py pack-pipeline "training/teach/${dataset}_trf_gpu/flat$seed/model-best" \
          "$OUT/teacher$seed"
      done ;;
    *) echo "unknown part: $part"; exit 2 ;;
  esac
done
