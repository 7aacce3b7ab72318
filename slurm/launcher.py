"""``nesyseq launch EXPERIMENT [KEY=VALUE ...]``: an experiment's stages as submitit jobs.

    nesyseq launch math --executor slurm --partition gpu --gpus-per-node 1 --array seed=1,2,3
    nesyseq launch math --executor local max_update=200

Each stage (prepare -> train -> evaluate) is one job, or one SLURM job array with
``--array``; a later stage waits for the earlier ones through ``afterok``.  A stage
whose DONE marker and declared outputs exist is skipped.  Every job's absolute
folder holds ``config.yaml`` (resolved), ``command.txt`` (the exact command line),
``git_commit.txt``, ``stage.log`` and, for training, ``checkpoints/``; submitit's
own logs are under ``RUN_DIR/.submitit/``.  ``RUN_DIR/jobs.json`` lists all jobs
for ``nesyseq status`` / ``nesyseq collect``.  With ``--executor local`` at most
``--local-parallel N`` jobs of a stage run at once (default: the usable CPUs).
"""
from __future__ import annotations

import argparse
import json
import os
import time
import zlib
from pathlib import Path

from nesyseq.common.errors import UserError

JOBS_FILE = "jobs.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("experiment", help="a name in configs/experiments/ (math, wmt, qa, folnet_lm) or a yaml path")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="overrides of the experiment's keys")
    parser.add_argument("--executor", choices=("slurm", "local"), default="slurm",
                        help="slurm: sbatch through submitit (default); local: submitit's local executor on this machine")
    parser.add_argument("--run-dir", default=None,
                        help="the run's folder (default runs/EXPERIMENT-YYYYmmdd-HHMMSS); relaunching into "
                             "an existing run skips its complete stages")
    parser.add_argument("--partition", default=None, help="SLURM partition (default: the cluster's default)")
    parser.add_argument("--nodes", type=int, default=1, help="nodes for the train stage (other stages use one)")
    parser.add_argument("--gpus-per-node", type=int, default=0,
                        help="GPUs per node; training runs one task per GPU (fairseq's SLURM distributed setup)")
    parser.add_argument("--tasks-per-node", type=int, default=None,
                        help="tasks per node for the train stage (default: --gpus-per-node, at least 1)")
    parser.add_argument("--cpus-per-task", type=int, default=1, help="CPUs per task")
    parser.add_argument("--mem-gb", type=float, default=None, help="memory per node in GB (default: the partition's)")
    parser.add_argument("--timeout-min", type=int, default=60,
                        help="time limit per job in minutes; a job that hits it is requeued (see --max-requeue)")
    parser.add_argument("--array", default=None, metavar="KEY=v1,v2,...",
                        help="one SLURM job array over these values (e.g. seed=1,2,3)")
    parser.add_argument("--dependency-chain", action=argparse.BooleanOptionalAction, default=True,
                        help="submit all stages now, chained with afterok (else: wait for each stage here)")
    parser.add_argument("--max-requeue", type=int, default=3,
                        help="how many times a preempted / timed-out job is requeued before it fails")
    parser.add_argument("--job-name", default=None, help="SLURM job name prefix (default: the experiment name)")
    parser.add_argument("--stages", default=None, metavar="A,B",
                        help="run only these stages (e.g. prepare,train); default: all")
    parser.add_argument("--dry-run", action="store_true", help="write the job folders and print the plan; submit nothing")
    parser.add_argument("--local-parallel", type=_positive, default=None, metavar="N",
                        help="--executor local: at most N jobs of a stage run at once, the next one starting when "
                             "one ends (default: the CPUs this process may use)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def local_parallel(args) -> int:
    """How many local jobs of one stage run at once: --local-parallel, else the usable CPUs."""
    if getattr(args, "local_parallel", None):
        return args.local_parallel
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not Linux
        return max(1, os.cpu_count() or 1)


def submit_windowed(ex, fns, window: int, poll_s: float = 0.5):
    """Submit ``fns`` to the local executor ``ex`` with at most ``window`` of them running at
    once: the next one starts when one ends.  Returns the jobs in ``fns`` order, the last ones
    possibly still running."""
    jobs, running = [], []
    for fn in fns:
        while len(running) >= window:
            running = [j for j in running if not j.done()]
            if len(running) >= window:
                time.sleep(poll_s)
        job = ex.submit(fn)
        jobs.append(job)
        running.append(job)
    return jobs


def tasks_per_node(args) -> int:
    return args.tasks_per_node or max(1, args.gpus_per_node)


def distributed_settings(args, job_folder: Path) -> dict:
    """The fairseq distributed keys of an experiment yaml, as --nodes / --gpus-per-node /
    --tasks-per-node imply them (docs/slurm.md, "Distributed training"):

    * ``world_size``: nodes x GPUs per node on GPUs (one rank per GPU: one SLURM task each, or
      one task per node from which fairseq spawns a process per GPU), nodes x tasks on CPUs;
    * ``distributed_port``: under SLURM with more than one rank, a port in [20000, 50000) fixed
      by the job's folder, so a requeued job reuses it and two array members do not share one.
      0 otherwise: with the local executor fairseq itself spawns one process per GPU on a free
      port (``_infer_single_node_init``), which it only does for port <= 0;
    * on GPUs ``device_flag`` "" (no --cpu), ``nccl`` and ``pytorch_ddp``; on CPU tasks
      ``--cpu``, ``gloo`` and ``legacy_ddp`` (torch DDP rejects device_ids for CPU modules).

    build_plan keeps only the keys the yaml has, and KEY=VALUE overrides win."""
    gpus, tasks = args.gpus_per_node, tasks_per_node(args)
    if gpus and tasks not in (1, gpus):
        raise UserError(f"--tasks-per-node {tasks} with --gpus-per-node {gpus}: fairseq's SLURM setup runs "
                        f"one task per GPU (--tasks-per-node {gpus}) or one task per node that spawns a "
                        f"process per GPU (--tasks-per-node 1)")
    world = args.nodes * (gpus if gpus else tasks)
    if args.executor == "local" and (args.nodes > 1 or (not gpus and tasks > 1)):
        raise UserError("--executor local runs one process on this machine: fairseq spawns its ranks only "
                        "over local GPUs (--gpus-per-node N); --nodes > 1 and CPU --tasks-per-node > 1 "
                        "need --executor slurm")
    slurm_ranks = args.executor == "slurm" and world > 1
    port = 20000 + zlib.crc32(str(job_folder).encode()) % 30000 if slurm_ranks else 0
    return dict(world_size=world, distributed_port=port, device_flag="" if gpus else "--cpu",
                distributed_backend="nccl" if gpus else "gloo",
                ddp_backend="pytorch_ddp" if gpus else "legacy_ddp")


def _check_world_size(args, plan) -> None:
    """A world_size=... override that the requested tasks cannot fill is an error here, not a
    hang in fairseq's rendezvous."""
    for jobs in plan.stages:
        for j in jobs:
            if not j.checkpointable or "world_size" not in j.config:
                continue
            want = distributed_settings(args, j.folder)["world_size"]
            if int(j.config["world_size"]) != want:
                raise UserError(f"world_size={j.config['world_size']} but --nodes {args.nodes} x "
                                f"{'--gpus-per-node ' + str(args.gpus_per_node) if args.gpus_per_node else '--tasks-per-node ' + str(tasks_per_node(args))}"
                                f" gives {want} ranks; drop the override (the launcher derives it) or change the flags")


def _slurm_params(args, job_name: str, distributed: bool) -> dict:
    """The SlurmExecutor parameters of one stage (also recorded by --dry-run, which needs no SLURM)."""
    params = dict(job_name=job_name, time=args.timeout_min, cpus_per_task=args.cpus_per_task,
                  signal_delay_s=120)
    if args.partition:
        params["partition"] = args.partition
    if args.mem_gb:
        params["mem"] = f"{int(args.mem_gb * 1024)}MB"
    if distributed:
        params["nodes"] = args.nodes
        params["ntasks_per_node"] = tasks_per_node(args)
        if args.gpus_per_node:
            params["gpus_per_node"] = args.gpus_per_node
    return params


def _executor(args, folder: Path, params: dict):
    import submitit

    if args.executor == "local":
        ex = submitit.LocalExecutor(folder=folder)
        ex.update_parameters(timeout_min=args.timeout_min)
        return ex
    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=args.max_requeue)   # needs srun on PATH
    ex.update_parameters(**params)
    return ex


def _write_job_folder(job, commit: str) -> None:
    from omegaconf import OmegaConf

    from nesyseq.common.atomic import atomic_write_text

    job.folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(job.folder / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(job.config)))
    atomic_write_text(job.folder / "command.txt", job.command_line + "\n")
    atomic_write_text(job.folder / "git_commit.txt", commit + "\n")


def run(args) -> int:
    from nesyseq.slurm.experiment import build_plan, git_commit
    from nesyseq.slurm.stage import StageJob, stage_complete

    name = Path(args.experiment).stem
    run_dir = Path(args.run_dir or f"runs/{name}-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    plan = build_plan(args.experiment, args.overrides, run_dir, args.array,
                      derived=lambda folder: distributed_settings(args, folder))
    _check_world_size(args, plan)
    run_dir.mkdir(parents=True, exist_ok=True)
    commit = git_commit()
    records = []
    previous_ids = []  # job ids of the last submitted stage, for afterok
    job_name = args.job_name or plan.name
    known = [jobs[0].stage for jobs in plan.stages]
    wanted = known if not args.stages else args.stages.split(",")
    for w in wanted:
        if w not in known:
            raise UserError(f"--stages {args.stages}: no stage {w!r} in {args.experiment} ({', '.join(known)})")
    for jobs in plan.stages:
        stage = jobs[0].stage
        if stage not in wanted:
            continue
        todo = [j for j in jobs if not stage_complete(j.folder, j.outputs)]
        for j in jobs:
            _write_job_folder(j, commit)
        if not todo:
            for j in jobs:
                records.append(dict(stage=stage, job_id="skipped (complete)", folder=str(j.folder),
                                    array=j.array_value, command=j.command_line))
            continue
        distributed = any(j.checkpointable for j in todo)
        params = _slurm_params(args, f"{job_name}-{stage}", distributed)
        if args.executor == "slurm" and previous_ids and args.dependency_chain:
            params["dependency"] = "afterok:" + ":".join(previous_ids)
        if args.executor == "slurm" and len(todo) > 1:
            params["array_parallelism"] = len(todo)
        # a dry run builds no executor: it must work where SLURM is not installed
        ex = None if args.dry_run else _executor(args, run_dir / ".submitit" / stage, params)
        fns = [StageJob(j.argv, str(j.folder), [str(p) for p in j.outputs], max_requeue=args.max_requeue)
               for j in todo]
        if args.dry_run:
            submitted: list = [None] * len(todo)
        elif args.executor == "local":
            submitted = submit_windowed(ex, fns, local_parallel(args))
        elif len(todo) > 1:
            with ex.batch():
                submitted = [ex.submit(fn) for fn in fns]
        else:
            submitted = [ex.submit(fns[0])]
        ids = []
        for j, sub in zip(todo, submitted):
            jid = "dry-run" if sub is None else str(sub.job_id)
            ids.append(jid)
            rec = dict(stage=stage, job_id=jid, folder=str(j.folder), array=j.array_value,
                       command=j.command_line, submitit_folder=str(run_dir / ".submitit" / stage),
                       executor=args.executor)
            if args.executor == "slurm":
                rec["slurm_params"] = params
            records.append(rec)
        if args.dry_run:
            continue
        # afterok on an array's base id waits for every member
        previous_ids = sorted({i.split("_")[0] for i in ids})
        if args.executor == "local" or not args.dependency_chain:
            failed = []     # every job of the stage is waited for: one failure does not stop the others
            for sub in submitted:
                try:
                    sub.result()
                except Exception as exc:
                    failed.append((sub, exc))
            if failed:
                _write_jobs(run_dir, plan.name, commit, args.executor, records)
                sub, exc = failed[0]
                more = f" and {len(failed) - 1} more of its {len(submitted)} jobs" if len(failed) > 1 else ""
                raise UserError(f"stage {stage} failed (job {sub.job_id}{more}); see nesyseq status {run_dir}: "
                                f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else exc!r}")
            previous_ids = []
    _write_jobs(run_dir, plan.name, commit, args.executor, records)
    _print_table(records)
    print(f"run folder: {run_dir}")
    return 0


def _write_jobs(run_dir: Path, experiment: str, commit: str, executor: str, records) -> None:
    """RUN_DIR/jobs.json, the one record `status` and `collect` read: the same keys whether the
    launch finished or a local stage failed (then it lists the jobs up to the failed one)."""
    from nesyseq.common.atomic import atomic_write_text

    atomic_write_text(run_dir / JOBS_FILE, json.dumps({"experiment": experiment, "git_commit": commit,
                                                       "executor": executor, "jobs": records}, indent=2) + "\n")


def _print_table(records) -> None:
    rows = [("stage", "job id", "array", "folder")]
    for r in records:
        arr = ",".join(f"{k}={v}" for k, v in (r.get("array") or {}).items()) or "-"
        rows.append((r["stage"], r["job_id"], arr, r["folder"]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
