"""Mean ± std over seeds, the one aggregation behind every QA table (`evaluate qa` in
qa_eval.py, `evaluate qa --babi-file` in qa_external.py): population std (n in the
denominator), 0 for a single run."""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Dict, List


def aggregate(rows: List[Dict[str, str]], keys) -> Dict[tuple, Dict[str, float]]:
    """{(row[k] for k in keys): {"mean", "std", "n"}} of float(row["error"])."""
    groups = defaultdict(list)
    for r in rows:
        groups[tuple(r.get(k, "") for k in keys)].append(float(r["error"]))
    return {k: {"mean": statistics.fmean(v), "std": statistics.pstdev(v) if len(v) > 1 else 0.0, "n": len(v)}
            for k, v in groups.items()}
