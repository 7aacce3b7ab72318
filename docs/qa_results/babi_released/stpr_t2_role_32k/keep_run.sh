#!/usr/bin/env bash
# Keep the record of one task-2 stpr run of configs/qa_babi_table2.sh: its report
# (qa_external.{md,json}) in REPORT_DEST, the fairseq train / valid lines of its log in LINES_DEST
# (stpr_t2_sSEED_{train,valid}.txt), and print its run_summary.py row (no header). Used by
# seeds_9_10/, seeds_11_12/ and seed5_variant.sh.
#   keep_run.sh OUT SEED REPORT_DEST LINES_DEST   (OUT: the script's OUT for that seed; from the repository root)
set -euo pipefail
O=${1:?OUT}; S=${2:?SEED}; REPORT_DEST=${3:?REPORT_DEST}; LINES_DEST=${4:?LINES_DEST}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$REPORT_DEST"
cp "$O/report/stpr/seeds_$S/qa_external".{md,json} "$REPORT_DEST/"
L=$O/ck/stpr_t2_s$S.log
sed -n 's/.* | INFO | train | //p' "$L" > "$LINES_DEST/stpr_t2_s${S}_train.txt"
"$HERE/../../valid_lines.sh" "$L" "$LINES_DEST/stpr_t2_s${S}_valid.txt"
PYTHONPATH=. python "$HERE/../run_summary.py" "$O/ck/stpr_t2_s$S" | tail -1
