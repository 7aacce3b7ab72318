#!/usr/bin/env bash
# Seed 5 of the per-role command again, with the dropout-aware valid loss driving the lr plateau
# rule and checkpoint_best (VALID_DROPOUT=1, --valid-entity-dropout, ours) (2026-11-28,
# thirty-first session, code 0b46bae; CPU, one thread, three runs at once with ../seeds_11_12/).
# OUT's data folder is a link to the one of ../seeds_11_12/ (the same prepare call).
#   commands.sh BABI_EN10K_DIR OUT
set -euo pipefail
B=${1:?the released en-10k folder}; O=${2:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/../seed5_variant.sh" VALID_DROPOUT=1 "$B" "$O" "$HERE"
