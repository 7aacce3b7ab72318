"""``nesyseq status RUN_DIR``: the state of every job of a run, and why a failed one failed.

State comes from SLURM's accounting (``sacct``; ``squeue`` for pending/running jobs)
for SLURM runs, and from the job folder (DONE marker) otherwise.  For a failed job
the cause is the last error line of its ``stage.log`` (the fairseq / nesyseq
output), else of submitit's stderr log.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path
from typing import Dict, Optional

from nesyseq.common.errors import UserError

ERROR_RE = re.compile(r"(Error|Exception|error:|FAILED|Traceback|not requeued)", re.I)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="the run folder that `nesyseq launch` printed")


def load_jobs(run_dir) -> dict:
    path = Path(run_dir).resolve() / "jobs.json"
    if not path.is_file():
        raise UserError(f"{path}: no such file (is {run_dir} a folder made by `nesyseq launch`?)")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None


def sacct_states(job_ids) -> Dict[str, str]:
    """{job id (array members as 12_3): state} from sacct; empty when SLURM is not reachable."""
    ids = sorted({j.split("_")[0] for j in job_ids if j[:1].isdigit()})
    if not ids:
        return {}
    try:
        out = subprocess.run(["sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(ids)],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    states = {}
    for line in out.stdout.splitlines():
        parts = line.split("|")
        if len(parts) >= 2:
            states[parts[0]] = parts[1].split()[0]
    return states


def failure_cause(folder: Path, job_id: str, submitit_folder: Optional[str]) -> str:
    """The last error-looking line of the stage log, else of submitit's stderr."""
    candidates = [folder / "stage.log"]
    if submitit_folder:
        candidates += sorted(Path(submitit_folder).glob(f"{job_id}_*_log.err"))
    for path in candidates:  # a requeue-limit verdict beats the error of the child it stopped
        try:
            hits = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if "not requeued" in ln]
        except OSError:
            continue
        if hits:
            return f"{hits[-1][:300]} ({path})"
    for path in candidates:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        hits = [ln.strip() for ln in lines if ERROR_RE.search(ln) and ln.strip() != "Traceback (most recent call last):"]
        if hits:
            return f"{hits[-1][:300]} ({path})"
    return ""


def job_state(rec: dict, states: Dict[str, str]) -> str:
    folder = Path(rec["folder"])
    jid = rec["job_id"]
    if jid.startswith("skipped"):
        return "SKIPPED (complete)"
    if jid in states:
        return states[jid]
    if (folder / "DONE.json").is_file():
        return "COMPLETED"
    if rec.get("executor") == "slurm":
        return "UNKNOWN (not in sacct)"
    return "FAILED" if (folder / "stage.log").is_file() else "NOT STARTED"


def run(args) -> int:
    data = load_jobs(args.run_dir)
    jobs = data.get("jobs", [])
    states = sacct_states([r["job_id"] for r in jobs if r.get("executor", "slurm") == "slurm"])  # local ids are PIDs
    rows = [("stage", "job id", "array", "state", "requeues", "cause")]
    for rec in jobs:
        folder = Path(rec["folder"])
        state = job_state(rec, states)
        try:
            requeues = str(json.loads((folder / "attempts.json").read_text()).get("requeues", 0))
        except (OSError, ValueError):
            requeues = "-"
        cause = ""
        if state.split()[0] in ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"):
            cause = failure_cause(folder, rec["job_id"], rec.get("submitit_folder"))
        arr = ",".join(f"{k}={v}" for k, v in (rec.get("array") or {}).items()) or "-"
        rows.append((rec["stage"], rec["job_id"], arr, state, requeues, cause))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + ("  " + r[5] if r[5] else ""))
    return 0
