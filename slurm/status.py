"""``nesyseq status RUN_DIR``: the state and progress of every job of a run, and why a failed
one failed; at any moment, from any shell (``nesyseq launch`` writes jobs.json before its first job
starts and at every change of state).

State comes from SLURM's accounting (``sacct``) for SLURM runs; for local runs from the job
folder (DONE marker), whether the job's process (its id is the PID) is alive, and the launch's
record.  Progress (slurm/watch.py) is read from each job's ``stage.log``: updates done of the
command's ``--max-update``, the last training and validation loss and, while it runs, the time
left.  For a failed job the cause is the last error line of its ``stage.log`` (the fairseq /
nesyseq output), else of submitit's stderr log, and the last lines of the log follow the table.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Dict, Optional

from nesyseq.common.errors import UserError
from nesyseq.slurm.watch import last_lines, pid_alive, progress_cell, this_host

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


def job_state(rec: dict, states: Dict[str, str], launcher: Optional[dict] = None) -> str:
    """SLURM's state (sacct) for a SLURM job; for a local one what its folder, its process and
    the launch's own record (``state`` in jobs.json) say."""
    folder = Path(rec["folder"])
    jid = rec["job_id"]
    if jid.startswith("skipped"):
        return "SKIPPED (complete)"
    if jid in states:
        return states[jid]
    if (folder / "DONE.json").is_file():
        return "COMPLETED"
    recorded = rec.get("state", "")
    if recorded.startswith(("NOT STARTED", "NOT SUBMITTED")):
        return recorded
    if rec.get("executor") == "slurm":
        return "PENDING (not submitted yet)" if jid == "pending" else "UNKNOWN (not in sacct)"
    here = not launcher or launcher.get("host") in (None, this_host())
    if jid == "pending":
        alive = pid_alive(str(launcher.get("pid", ""))) if launcher and here else None
        return "NOT STARTED (the launch stopped)" if alive is False else "PENDING"
    alive = pid_alive(jid) if here else None
    if alive or (alive is None and recorded == "RUNNING"):
        return "RUNNING"
    if recorded == "FAILED" or (folder / "stage.log").is_file():
        return "FAILED"
    return "NOT STARTED"


FAILED_STATES = ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED")
LOG_LINES = 8   # the last lines of a failed job's log that `status` shows


def run(args) -> int:
    data = load_jobs(args.run_dir)
    jobs = data.get("jobs", [])
    launcher = data.get("launcher")
    states = sacct_states([r["job_id"] for r in jobs if r.get("executor", "slurm") == "slurm"])  # local ids are PIDs
    rows = [("stage", "job id", "array", "state", "requeues", "progress", "cause")]
    failed = []
    now = time.time()
    for rec in jobs:
        folder = Path(rec["folder"])
        state = job_state(rec, states, launcher)
        try:
            requeues = str(json.loads((folder / "attempts.json").read_text()).get("requeues", 0))
        except (OSError, ValueError):
            requeues = "-"
        cause = ""
        head = state.split()[0] if state else ""
        if head in FAILED_STATES:
            cause = failure_cause(folder, rec["job_id"], rec.get("submitit_folder"))
            failed.append(rec)
        # a failed job's progress goes with its log's last lines, below the table
        progress = "" if head in ("SKIPPED", "PENDING", "NOT") + FAILED_STATES else \
            progress_cell(rec, head == "RUNNING", now)
        arr = ",".join(f"{k}={v}" for k, v in (rec.get("array") or {}).items()) or "-"
        rows.append((rec["stage"], rec["job_id"], arr, state, requeues, progress, cause))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:6], widths)).rstrip() + ("  " + r[6] if r[6] else ""))
    for rec in failed:
        log = Path(rec["folder"]) / "stage.log"
        lines = last_lines(log, LOG_LINES)
        arr = ",".join(f"{k}={v}" for k, v in (rec.get("array") or {}).items())
        print(f"\n{rec['stage']}{' ' + arr if arr else ''} (job {rec['job_id']}): the last lines of {log}:"
              if lines else f"\n{rec['stage']}{' ' + arr if arr else ''}: no log at {log}")
        progress = progress_cell(rec, False, now)
        if progress:
            print(f"    (where it stopped: {progress})")
        for ln in lines:
            print(f"    {ln[:300]}")
    return 0
