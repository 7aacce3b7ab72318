#!/bin/bash
# One device session for the Triton trans kernels: CUDA tests, tile sweep,
# benchmark, FOLNet step.  Logs go to $OUT (default ./gpu_out).  Usage:
#   bash benchmarks/gpu_trans_session.sh [tests] [tune] [bench] [folnet]
# fairseq must be importable for the FOLNet parts (tests/test_trans_cuda.py's module
# test and bench_folnet.py); each step has its own time limit so one slow step
# cannot eat the others'.
set -u
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
steps=${*:-tests tune bench folnet}
t0=$(date +%s)
stamp() { echo "=== $1 at +$(( $(date +%s) - t0 ))s"; }
{ nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv;
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } 2>&1 | tee "$OUT/env.txt"
for s in $steps; do
  case $s in
    tests)
      stamp tests
      timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_trans_cuda.py tests/test_trans_launch.py \
        tests/test_trans_layout.py -rA --durations=10 2>&1 | tail -60 > "$OUT/tests.log"; tail -25 "$OUT/tests.log" ;;
    tune)
      stamp tune
      timeout ${TUNE_LIMIT:-200} python3 benchmarks/tune_trans.py --json "$OUT/tune.json" > "$OUT/tune.log" 2>&1
      grep BEST "$OUT/tune.log" ;;
    bench)
      stamp bench
      timeout ${BENCH_LIMIT:-300} python3 benchmarks/bench_trans.py --markdown "$OUT/bench_trans.md" ${BENCH_ARGS:-} \
        > "$OUT/bench_trans.log" 2>&1; tail -5 "$OUT/bench_trans.log" ;;
    folnet)
      stamp folnet
      for impl in auto torch; do
        timeout ${FOLNET_LIMIT:-100} python3 benchmarks/bench_folnet.py --full --dtype bf16 --trans-impl $impl \
          --lengths ${FOLNET_LENGTHS:-128,256,512} --repeats 3 > "$OUT/folnet_bf16_$impl.log" 2>&1
        grep -v INFO "$OUT/folnet_bf16_$impl.log" | tail -22
      done ;;
  esac
done
stamp done
