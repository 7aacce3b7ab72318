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
    from nesyseq.slurm.experiment import experiment_names

    parser.add_argument("experiment", help=f"a name in configs/experiments/ ({', '.join(experiment_names())}) "
                                           "or a yaml path")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="overrides of the experiment's keys")
    parser.add_argument("--executor", choices=("slurm", "local"), default="slurm",
                        help="slurm: sbatch through submitit (default); local: submitit's local executor on this "
                             "machine, each stage's jobs side by side (one process each), stages in turn, with a "
                             "progress line per job and the results table at the end (docs/slurm.md)")
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
                        help="time limit per job in minutes, locally too: a job that hits it is stopped, requeued "
                             "and resumed from its checkpoint_last.pt (see --max-requeue)")
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
        ex = submitit.LocalExecutor(folder=folder, max_num_timeout=args.max_requeue)
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


POLL_S = 1.0          # how often a waiting local launch looks at its jobs
PROGRESS_EVERY_S = 5.0   # at most one progress line per job this often


def run(args) -> int:
    from nesyseq.slurm.experiment import build_plan, git_commit
    from nesyseq.slurm.stage import StageJob, stage_complete
    from nesyseq.slurm.watch import this_host

    name = Path(args.experiment).stem
    run_dir = Path(args.run_dir or f"runs/{name}-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    plan = build_plan(args.experiment, args.overrides, run_dir, args.array,
                      derived=lambda folder: distributed_settings(args, folder))
    _check_world_size(args, plan)
    known = [jobs[0].stage for jobs in plan.stages]
    wanted = known if not args.stages else args.stages.split(",")
    for w in wanted:
        if w not in known:
            raise UserError(f"--stages {args.stages}: no stage {w!r} in {args.experiment} ({', '.join(known)})")
    run_dir.mkdir(parents=True, exist_ok=True)
    commit = git_commit()
    job_name = args.job_name or plan.name
    waits = args.executor == "local" or not args.dependency_chain   # this process waits for each stage
    # every job's record first, so that jobs.json lists the whole run before anything starts
    records, stages = [], []
    for jobs in plan.stages:
        stage = jobs[0].stage
        if stage not in wanted:
            continue
        for j in jobs:
            _write_job_folder(j, commit)
        todo, recs = [], []
        for j in jobs:
            complete = stage_complete(j.folder, j.outputs)
            rec = dict(stage=stage, job_id="skipped (complete)" if complete else "pending",
                       state="SKIPPED" if complete else "PENDING", folder=str(j.folder), array=j.array_value,
                       command=j.command_line, submitit_folder=str(run_dir / ".submitit" / stage),
                       executor=args.executor)
            records.append(rec)
            if not complete:
                todo.append(j)
                recs.append(rec)
        stages.append((stage, jobs, todo, recs))
    launcher = {"pid": os.getpid(), "host": this_host(), "started": time.time(), "waits": waits,
                "dry_run": bool(args.dry_run)}

    def save():
        _write_jobs(run_dir, plan.name, commit, args.executor, records, launcher)

    save()
    if not args.dry_run:
        print(f"run folder: {run_dir} (nesyseq status {run_dir} shows it from any shell)", flush=True)
    previous_ids = []  # job ids of the last submitted stage, for afterok
    try:
        for n, (stage, jobs, todo, recs) in enumerate(stages, 1):
            head = f"[{n}/{len(stages)}] {stage}"
            if not todo:
                if not args.dry_run:
                    print(f"{head}: complete, skipped", flush=True)
                continue
            distributed = any(j.checkpointable for j in todo)
            params = _slurm_params(args, f"{job_name}-{stage}", distributed)
            if args.executor == "slurm" and previous_ids and args.dependency_chain:
                params["dependency"] = "afterok:" + ":".join(previous_ids)
            if args.executor == "slurm" and len(todo) > 1:
                params["array_parallelism"] = len(todo)
            if args.dry_run:   # a dry run builds no executor: it must work where SLURM is not installed
                for rec in recs:
                    rec["job_id"] = "dry-run"
                    if args.executor == "slurm":
                        rec["slurm_params"] = params
                continue
            ex = _executor(args, run_dir / ".submitit" / stage, params)
            fns = [StageJob(j.argv, str(j.folder), [str(p) for p in j.outputs], max_requeue=args.max_requeue)
                   for j in todo]
            if args.executor == "local":   # at most --local-parallel of them at once
                submitted = submit_windowed(ex, fns, local_parallel(args))
            elif len(todo) > 1:
                with ex.batch():
                    submitted = [ex.submit(fn) for fn in fns]
            else:
                submitted = [ex.submit(fns[0])]
            for rec, sub in zip(recs, submitted):
                rec["job_id"] = str(sub.job_id)
                rec["state"] = "RUNNING" if args.executor == "local" else "SUBMITTED"
                rec["submitted"] = time.time()
                if args.executor == "slurm":
                    rec["slurm_params"] = params
            save()
            labels = [_label(r) for r in recs]
            together = " side by side" if args.executor == "local" and len(recs) > 1 else ""
            print(f"{head}: {len(recs)} job{'s' if len(recs) > 1 else ''}{together}"
                  f"{' (' + ', '.join(lb for lb in labels if lb) + ')' if any(labels) else ''}; "
                  f"job id{'s' if len(recs) > 1 else ''} {', '.join(r['job_id'] for r in recs)}", flush=True)
            # afterok on an array's base id waits for every member
            previous_ids = sorted({r["job_id"].split("_")[0] for r in recs})
            if waits:
                _wait(stage, recs, submitted, run_dir, save)
                previous_ids = []
    finally:   # a stage that failed (or a stopped launch) leaves the later ones unsubmitted
        for rec in records:
            if rec["state"] == "PENDING":
                rec["state"] = "NOT SUBMITTED (dry run)" if args.dry_run else "NOT STARTED"
        save()
    _print_table(records)
    print(f"run folder: {run_dir}")
    if args.dry_run:
        return 0
    if not waits:
        print(f"submitted: nesyseq status {run_dir} while it runs, nesyseq collect {run_dir} at the end")
        return 0
    _print_results(run_dir, records)
    return 0


def _label(rec: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in (rec.get("array") or {}).items())


def _wait(stage: str, recs, submitted, run_dir: Path, save) -> None:
    """Wait for one stage's jobs, printing a progress line per job at most every
    PROGRESS_EVERY_S seconds and its end; jobs.json follows every change of state.  A failed job
    is a one-line error naming its cause (the last error line of its log)."""
    from nesyseq.slurm.status import failure_cause
    from nesyseq.slurm.watch import JobWatch

    from nesyseq.common.train_log import fmt_time

    watches = [JobWatch(r, f"{stage} {_label(r)}".strip(), every=PROGRESS_EVERY_S) for r in recs]
    pending = list(zip(recs, submitted, watches))
    failed = []
    while pending:
        now = time.time()
        for item in list(pending):
            rec, sub, watch = item
            line = watch.poll(now)
            if line:
                print(line, flush=True)
            if not sub.done():
                continue
            pending.remove(item)
            line = watch.poll(time.time(), final=True)
            if line:
                print(line, flush=True)
            try:
                sub.result()
                rec["state"] = "COMPLETED"
                print(f"      {watch.label}: done in {fmt_time(time.time() - watch.t0)}", flush=True)
            except Exception as exc:   # the job's own exception, re-raised by submitit
                rec["state"] = "FAILED"
                text = str(exc).strip()
                cause = failure_cause(Path(rec["folder"]), rec["job_id"], rec.get("submitit_folder"))
                rec["cause"] = cause or (text.splitlines()[-1] if text else repr(exc))
                failed.append(rec)
                print(f"      {watch.label}: FAILED after {fmt_time(time.time() - watch.t0)}: {rec['cause']}",
                      flush=True)
            save()
        if pending:
            time.sleep(POLL_S)
    if failed:
        rec = failed[0]
        who = f"stage {stage} {_label(rec)}".strip()
        raise UserError(f"{who} failed (job {rec['job_id']}): {rec['cause']}; nesyseq status {run_dir} "
                        "shows the last lines of its log")


def _print_results(run_dir: Path, records) -> None:
    """After a launch that waited for its jobs: the collected results table, where the run has an
    evaluate stage whose jobs all finished."""
    from nesyseq.slurm.collect import collect

    evals = [r for r in records if r["stage"] == "evaluate"]
    if not evals or any(r["state"] not in ("COMPLETED", "SKIPPED") for r in evals):
        return
    try:
        paths = collect(run_dir)
    except UserError as exc:
        print(f"no results table: {exc}")
        return
    print()
    print(paths[1].read_text(), end="")
    print(f"(nesyseq collect {run_dir}: {', '.join(p.name for p in paths)})")


def _write_jobs(run_dir: Path, experiment: str, commit: str, executor: str, records, launcher=None) -> None:
    """RUN_DIR/jobs.json, the one record `status` and `collect` read, written before the first job
    starts and again at every change of a job's state (``state``: PENDING, RUNNING / SUBMITTED,
    COMPLETED, FAILED, SKIPPED; ``job_id`` "pending" until it is submitted).  ``launcher`` names the
    launching process, so that `status` can tell a pending job of a stopped launch."""
    from nesyseq.common.atomic import atomic_write_text

    data = {"experiment": experiment, "git_commit": commit, "executor": executor, "jobs": records}
    if launcher:
        data["launcher"] = launcher
    atomic_write_text(run_dir / JOBS_FILE, json.dumps(data, indent=2) + "\n")


def _print_table(records) -> None:
    rows = [("stage", "job id", "array", "folder")]
    for r in records:
        arr = ",".join(f"{k}={v}" for k, v in (r.get("array") or {}).items()) or "-"
        rows.append((r["stage"], r["job_id"], arr, r["folder"]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
