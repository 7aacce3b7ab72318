"""What runs inside a SLURM (or local) job: one stage's argv, in its own folder.

``StageJob`` is a ``submitit.helpers.Checkpointable``: on USR2 (preemption, or
the time-limit warning) submitit calls :meth:`checkpoint`, which stops the
child and resubmits the same job; on restart ``fairseq-train`` resumes from
``checkpoint_last.pt`` in the stage's fixed absolute ``--save-dir``.  The
number of requeues is capped (``max_requeue``), so a job that keeps dying is
not requeued forever.  A child that exits non-zero (a real error) is not
requeued at all: the job fails and ``nesyseq status`` shows the cause.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import submitit

from nesyseq.common.atomic import atomic_write_text

DONE = "DONE.json"
PREEMPTED = "preempted"  # rank 0 touches it before stopping its child on USR2
ATTEMPTS = "attempts.json"


def stage_complete(folder: Path, outputs: List[Path]) -> bool:
    """Done marker written after a zero exit, and every declared output present."""
    return (Path(folder) / DONE).is_file() and all(Path(p).exists() for p in outputs)


class StageJob(submitit.helpers.Checkpointable):
    def __init__(self, argv: List[str], folder: str, outputs: List[str], max_requeue: int = 3,
                 env: Optional[dict] = None):
        self.argv = list(argv)
        self.folder = str(folder)
        self.outputs = list(outputs)
        self.max_requeue = int(max_requeue)
        self.env = dict(env or {})
        self._proc = None

    # -- bookkeeping in the job folder -------------------------------------------------
    def _attempts(self) -> dict:
        try:
            return json.loads((Path(self.folder) / ATTEMPTS).read_text())
        except (OSError, ValueError):
            return {"starts": 0, "requeues": 0}

    def _save_attempts(self, state: dict) -> None:
        atomic_write_text(Path(self.folder) / ATTEMPTS, json.dumps(state) + "\n")

    # -- the job -----------------------------------------------------------------------
    def __call__(self) -> str:
        folder = Path(self.folder)
        folder.mkdir(parents=True, exist_ok=True)
        rank = int(os.environ.get("SLURM_PROCID", "0")) if "SLURM_JOB_ID" in os.environ else 0
        started = time.time()
        state = self._attempts()
        if rank == 0:  # one task keeps the books; the others only log
            state["starts"] += 1
            self._save_attempts(state)
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.update(self.env)
        log = folder / ("stage.log" if rank == 0 else f"stage.rank{rank}.log")
        with open(log, "a") as f:
            f.write(f"=== start {state['starts']} at {time.strftime('%Y-%m-%d %H:%M:%S')} "
                    f"(requeues so far {state['requeues']}) ===\n")
            f.flush()
            # The child ignores USR2 (SIG_IGN survives exec): only this process handles
            # preemption, stops the child cleanly and requeues.
            proc = subprocess.Popen(self.argv, stdout=f, stderr=subprocess.STDOUT, cwd=folder, env=env,
                                    preexec_fn=lambda: signal.signal(signal.SIGUSR2, signal.SIG_IGN))
            self._proc = proc  # the USR2 handler stops it
            # Poll rather than block in wait(): the USR2 handler runs in this thread and must be
            # able to reap the child itself (a blocked wait() holds Popen's lock for a minute).
            while (rc := proc.poll()) is None:
                time.sleep(0.2)
        if rc != 0 and rank != 0 and self._preempted_since(started):
            # rank 0 is requeueing the job: our child lost its peer; wait to be killed by the
            # requeue instead of failing the whole job step first
            time.sleep(300)
        if rc != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise RuntimeError(f"stage command exited with status {rc} (log: {log}); last lines:\n{tail}")
        missing = [p for p in self.outputs if not Path(p).exists()]
        if missing:
            raise RuntimeError(f"stage finished but its outputs are missing: {missing}")
        if rank != 0:
            return str(folder)
        atomic_write_text(folder / DONE, json.dumps({"finished": time.time(), "starts": state["starts"],
                                                 "requeues": state["requeues"]}) + "\n")
        return str(folder)

    def _preempted_since(self, t: float) -> bool:
        try:
            return (Path(self.folder) / PREEMPTED).stat().st_mtime >= t - 1
        except OSError:
            return False

    def checkpoint(self, *args, **kwargs):
        """USR2: stop the child (fairseq keeps checkpoint_last.pt) and requeue, up to max_requeue times."""
        atomic_write_text(Path(self.folder) / PREEMPTED, f"{time.time()}\n")
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        state = self._attempts()
        if state["requeues"] >= self.max_requeue:
            msg = (f"nesyseq: not requeued: the limit of {self.max_requeue} requeue(s) is reached "
                   f"(--max-requeue; {state['starts']} start(s))")
            with open(Path(self.folder) / "stage.log", "a") as f:  # where `nesyseq status` looks first
                f.write(msg + "\n")
            print(msg, file=sys.stderr, flush=True)
            return None  # submitit then marks the job as failed ("checkpoint function returned None")
        state["requeues"] += 1
        self._save_attempts(state)
        self._proc = None
        return submitit.helpers.DelayedSubmission(self)
