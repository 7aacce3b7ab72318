#!/usr/bin/env bash
# valid_lines.sh LOG DEST: the per-epoch valid lines of a fairseq-train LOG (the text after
# "| INFO | valid | "), written to DEST whole or not at all (a .tmp file moved into place).
# Shared by the record scripts under docs/qa_results.
set -euo pipefail
LOG=${1:?LOG} DEST=${2:?DEST}
[ -f "$LOG" ] || { echo "valid_lines.sh: $LOG: no such log" >&2; exit 1; }
sed -n 's/.* | INFO | valid | //p' "$LOG" > "$DEST.tmp"
mv "$DEST.tmp" "$DEST"
