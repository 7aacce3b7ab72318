#!/usr/bin/env bash
# Test error of OUT/ck/NAME/checkpoint_best.pt (greedy decoding, answer = first token):
#   test_error.sh OUT NAME DATA_BIN      writes OUT/ck/NAME.gen and prints the error
set -euo pipefail
OUT=$1 N=$2 D=$3
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} fairseq-generate "$D" --user-dir "$HERE/user_dir" --task babi_qa \
  --path "$OUT/ck/$N/checkpoint_best.pt" --gen-subset test --beam 1 --batch-size 128 --cpu > "$OUT/ck/$N.gen" 2>/dev/null
python - "$OUT/ck/$N.gen" "$N" <<'PY'
import sys
T, H = {}, {}
for line in open(sys.argv[1]):
    p = line.rstrip("\n").split("\t")
    if line.startswith("T-"):
        T[p[0][2:]] = p[1]
    elif line.startswith("H-"):
        H[p[0][2:]] = p[2]
wrong = sum(H[k] != T[k] for k in T)
print(f"{sys.argv[2]}: test error {100 * wrong / len(T):.2f}% ({wrong}/{len(T)})")
PY
