#!/usr/bin/env bash
# Seed 5 of the per-role task-2 command again with LR_PATIENCE=20 (the plateau rule waits 20
# epochs instead of 10 before halving) (2026-11-28, thirty-first session, code 0b46bae; CPU, one
# thread, three runs at once with the Fig. 1 10,000-name runs). OUT's data folder is a link to the
# one of ../seeds_11_12/ (the same prepare call).
#   commands.sh BABI_EN10K_DIR OUT
set -euo pipefail
B=${1:?the released en-10k folder}; O=${2:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/../seed5_variant.sh" LR_PATIENCE=20 "$B" "$O" "$HERE"
