"""nesyseq launch / status / collect on a real single-node SLURM (slurm/local_cluster.sh).

The session fixture brings the cluster up (installing Debian's packages on first use) and
stops exactly the daemons it started.  Skipped, with the reason, only where the cluster
cannot be started for a reason outside the project (not root, no apt-get / Debian).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "slurm" / "local_cluster.sh"
TINY = ["per_module=20", "test_per_module=5", "modules=numbers__place_value,comparison__pair",
        "max_tokens=1000", "lr=0.003"]


@pytest.fixture(scope="session")
def slurm_cluster():
    if os.geteuid() != 0:
        pytest.skip("local SLURM needs root (slurm/local_cluster.sh installs packages and writes /etc/slurm)")
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        pytest.skip("no apt-get and no slurmctld: not a Debian machine, cannot install the local SLURM")
    already = subprocess.run([str(SCRIPT), "status"], capture_output=True).returncode == 0
    if not already:
        up = subprocess.run([str(SCRIPT), "up"], capture_output=True, text=True, timeout=900)
        if up.returncode != 0:
            if "apt-get install failed" in up.stderr:
                pytest.skip(f"cannot install the SLURM packages (no package mirror?): {up.stderr.strip()}")
            pytest.fail(f"slurm/local_cluster.sh up failed:\n{up.stderr}")
    yield
    if not already:
        subprocess.run([str(SCRIPT), "down"], capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    """The tiny math data, prepared once (local executor, DONE marker included); a test copies
    it to RUN_DIR/prepare so that its own launch skips the prepare stage."""
    run_dir = tmp_path_factory.mktemp("prepared")
    nesyseq("launch", "math", *TINY, "--executor", "local", "--stages", "prepare", "--run-dir", run_dir)
    return run_dir / "prepare"


def with_prepared(run_dir, prepared):
    shutil.copytree(prepared, Path(run_dir) / "prepare")
    return run_dir


def nesyseq(*args, check=True):
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"nesyseq {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def jobs(run_dir):
    return json.loads((Path(run_dir) / "jobs.json").read_text())["jobs"]


TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")


def sacct(job_ids):
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j",
                          ",".join(sorted({j.split("_")[0] for j in job_ids}))],
                         capture_output=True, text=True).stdout
    return {ln.split("|")[0]: ln.split("|")[1].split()[0] for ln in out.splitlines() if "|" in ln}


def wait_jobs(job_ids, timeout=240, until=TERMINAL):
    t0 = time.time()
    while time.time() - t0 < timeout:
        st = sacct(job_ids)
        if all(st.get(j, "").startswith(until) for j in job_ids):
            return st
        time.sleep(1)
    raise AssertionError(f"jobs {job_ids} not finished after {timeout}s: {sacct(job_ids)}")


def wait_done(folder, timeout=300):
    """A requeued job passes through transient states in sacct: wait for its DONE marker."""
    t0 = time.time()
    while not (Path(folder) / "DONE.json").exists():
        assert time.time() - t0 < timeout, f"{folder}: no DONE.json after {timeout}s"
        time.sleep(1)


def final_checkpoint(path):
    import nesyseq.plugins.checkpoint_safety  # noqa: F401  (safe globals; weights_only stays True)
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state["model"], state["optimizer_history"][-1]["num_updates"], state["extra_state"]["val_loss"]


@pytest.mark.slow
def test_chain_array_status_collect_and_skip(slurm_cluster, tmp_path):
    """prepare -> train -> evaluate as afterok-chained jobs; train/evaluate as 3-task arrays."""
    run_dir = tmp_path / "run with space's \"quotes\" $(touch pwned)"
    out = nesyseq("launch", "math", *TINY, "max_update=10", "save_interval_updates=5",
                  "--run-dir", run_dir, "--array", "seed=1,2,3").stdout
    recs = jobs(run_dir)
    assert [r["stage"] for r in recs] == ["prepare"] + ["train"] * 3 + ["evaluate"] * 3
    train_ids = [r["job_id"] for r in recs if r["stage"] == "train"]
    assert len({i.split("_")[0] for i in train_ids}) == 1 and sorted(i.split("_")[1] for i in train_ids) == ["0", "1", "2"]
    for r in recs:
        assert r["job_id"] in out and r["folder"] in out  # the printed job table
    # evaluate waits on train through afterok, read while train cannot have finished: it is held
    # (it waits on prepare, which takes seconds, so it is still pending when the hold comes)
    train_base = train_ids[0].split("_")[0]
    subprocess.run(["scontrol", "hold", train_base], check=True, capture_output=True)
    held = subprocess.run(["squeue", "-h", "-r", "-j", train_base, "-o", "%T"], capture_output=True, text=True).stdout
    assert held.split() == ["PENDING"] * 3, held
    dep = subprocess.run(["scontrol", "show", "job", recs[-1]["job_id"].split("_")[0]], capture_output=True,
                         text=True).stdout
    assert re.search(rf"Dependency=afterok:{train_base}(_\*)?\(unfulfilled\)", dep), dep
    subprocess.run(["scontrol", "release", train_base], check=True, capture_output=True)
    st = wait_jobs([r["job_id"] for r in recs], timeout=600)   # 7 jobs on 2 CPUs: minutes on a loaded machine
    assert set(st.values()) == {"COMPLETED"}, st
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    for r in recs:
        folder = Path(r["folder"])
        assert folder.is_absolute() and (folder / "config.yaml").is_file()
        assert (folder / "git_commit.txt").read_text().strip()
        assert (folder / "command.txt").read_text().strip() == r["command"]
    seed2 = Path(recs[2]["folder"])
    assert "--seed 2" in (seed2 / "command.txt").read_text()
    assert "seed: 2" in (seed2 / "config.yaml").read_text()
    _, updates, _ = final_checkpoint(seed2 / "checkpoints" / "checkpoint_last.pt")
    assert updates == 10

    status = nesyseq("status", run_dir).stdout
    assert status.count("COMPLETED") == 7
    coll = nesyseq("collect", run_dir).stdout
    assert "over 3 runs" in coll   # identical values across the seeds print without ± (slurm/collect.py)
    assert "std" in (run_dir / "collect.csv").read_text().splitlines()[0]
    assert (run_dir / "collect.png").stat().st_size > 1000
    # relaunch: every stage is complete, nothing is submitted
    again = nesyseq("launch", "math", *TINY, "max_update=10", "save_interval_updates=5",
                    "--run-dir", run_dir, "--array", "seed=1,2,3").stdout
    assert again.count("skipped (complete)") == 7


@pytest.mark.slow
def test_failing_job_cause_in_status(slurm_cluster, prepared, tmp_path):
    run_dir = with_prepared(tmp_path / "fail", prepared)
    nesyseq("launch", "math", *TINY, "arch=no_such_arch", "--run-dir", run_dir)
    recs = jobs(run_dir)
    assert recs[0]["job_id"].startswith("skipped")
    train = [r for r in recs if r["stage"] == "train"][0]
    st = wait_jobs([train["job_id"]])
    assert st[train["job_id"]] == "FAILED"
    subprocess.run(["scancel", recs[-1]["job_id"]])  # evaluate can never start (afterok)
    status = nesyseq("status", run_dir).stdout
    line = [ln for ln in status.splitlines() if ln.startswith("train")][0]
    assert "FAILED" in line and "no_such_arch" in line, status


def _valid_losses(log_text):
    """{num_updates: valid loss} from fairseq's 'valid on' lines."""
    out = {}
    for ln in log_text.splitlines():
        m = re.search(r"valid on .*\| loss ([0-9.]+) .*num_updates (\d+)", ln)
        if m:
            out[int(m.group(2))] = float(m.group(1))
    return out


def _wait_for(path, text, timeout=180):
    t0 = time.time()
    while True:
        try:
            if text in Path(path).read_text(errors="replace"):
                return
        except OSError:
            pass
        assert time.time() - t0 < timeout, f"{path}: no {text!r} after {timeout}s"
        time.sleep(0.2)


def _assert_same_weights(model, ref):
    """Tolerance 0 (bitwise): see test_requeue_resume_matches_uninterrupted."""
    assert model.keys() == ref.keys()
    for k in ref:
        assert torch.equal(model[k], ref[k]), (k, (model[k] - ref[k]).abs().max().item())


@pytest.mark.slow
def test_requeue_resume_matches_uninterrupted(slurm_cluster, prepared, tmp_path):
    """USR2 mid-training -> submitit requeue -> fairseq resumes from checkpoint_last.pt, and
    ends exactly where an uninterrupted run with the same seed ends.

    Reference: the same train stage run uninterrupted (a second SLURM job, same data and
    seed).  The requeued run must log the same valid loss at every validation, before and
    after the resume point, reach the same 100 updates, and end with the same weights.
    Tolerance 0 (bitwise equality of every parameter): with OMP_NUM_THREADS=1 on CPU, a
    resumed run that restores the weights, Adam's moments, the update count, the lr schedule
    and the data order performs exactly the float operations of the uninterrupted run, in the
    same order (measured: max |dw| = 0.0 for resumes at 5, 14, 15 and 22 of 40 updates, and
    in this test).  Any state it failed to restore shows as a nonzero difference; before
    plugins/patches/resume_batches.py made the batches independent of the resume epoch, the losses
    differed from the first update of the next epoch (0.649 vs 0.627 at update 40)."""
    # save_interval_updates=7 with 5 updates per epoch: the resume point falls mid-epoch.
    # 100 updates (300 before the suite had to fit in 10 minutes) still leave the run going
    # well after its first checkpoint, when USR2 is sent
    UPDATES = 100
    common = [*TINY, f"max_update={UPDATES}", "save_interval_updates=7", "max_tokens=400", "save_interval=1000"]
    # both runs train on the same prepared data (their prepare stages are skipped)
    ref_dir, pre_dir = with_prepared(tmp_path / "ref", prepared), with_prepared(tmp_path / "pre", prepared)
    nesyseq("launch", "math", *common, "--run-dir", ref_dir, "--stages", "prepare,train")
    nesyseq("launch", "math", *common, "--run-dir", pre_dir, "--max-requeue", "2", "--stages", "prepare,train")
    train = [r for r in jobs(pre_dir) if r["stage"] == "train"][0]
    assert [r for r in jobs(pre_dir) if r["stage"] == "prepare"][0]["job_id"].startswith("skipped")
    ckpt = Path(train["folder"]) / "checkpoints" / "checkpoint_last.pt"
    t0 = time.time()
    while not ckpt.exists():
        assert time.time() - t0 < 180, "no checkpoint_last.pt"
        time.sleep(0.2)
    subprocess.run(["scancel", "--signal=USR2", train["job_id"]], check=True)
    wait_done(train["folder"])
    wait_jobs([r["job_id"] for r in jobs(ref_dir)[1:]] + [r["job_id"] for r in jobs(pre_dir)[1:]], timeout=300)
    attempts = json.loads((Path(train["folder"]) / "attempts.json").read_text())
    assert attempts["requeues"] == 1 and attempts["starts"] == 2, attempts
    log = (Path(train["folder"]) / "stage.log").read_text()
    m = re.search(r"Loaded checkpoint .* \(epoch \d+ @ (\d+) updates\)", log)
    assert m and log.count("=== start") == 2, log[-2000:]
    resumed_at = int(m.group(1))
    assert 0 < resumed_at < UPDATES
    ref_train = Path([r for r in jobs(ref_dir) if r["stage"] == "train"][0]["folder"])
    ref_log = _valid_losses((ref_train / "stage.log").read_text())
    pre_log = _valid_losses(log)  # after the resume: the second attempt's values
    assert max(ref_log) == UPDATES and any(n > resumed_at for n in ref_log)
    assert {n: pre_log.get(n) for n in ref_log} == ref_log
    ref_model, ref_updates, ref_loss = final_checkpoint(ref_train / "checkpoints" / "checkpoint_last.pt")
    model, updates, loss = final_checkpoint(ckpt)
    assert updates == ref_updates == UPDATES
    # The valid losses, logged and stored, are fairseq's 3-decimal rounding: equal ones alone could
    # come from two different runs.  What shows the same run is the weights, bit for bit; the
    # loss of the requeued run is the reference's only because they are.
    _assert_same_weights(model, ref_model)
    assert loss == ref_loss
    status = nesyseq("status", pre_dir).stdout
    assert re.search(r"train\s+\S+\s+-\s+COMPLETED\s+1", status), status


@pytest.mark.slow
def test_requeue_limit_fails_the_job_and_status_says_why(slurm_cluster, prepared, tmp_path):
    """--max-requeue 1: the first USR2 requeues, the second fails the job; `status` names the limit."""
    run_dir = with_prepared(tmp_path / "limit", prepared)
    nesyseq("launch", "math", *TINY, "max_update=100000", "--run-dir", run_dir, "--max-requeue", "1",
            "--stages", "prepare,train")
    train = [r for r in jobs(run_dir) if r["stage"] == "train"][0]
    log = Path(train["folder"]) / "stage.log"
    for attempt in (1, 2):
        _wait_for(log, f"=== start {attempt} ")
        subprocess.run(["scancel", "--signal=USR2", train["job_id"]], check=True)
    st = wait_jobs([train["job_id"]], timeout=120)
    assert st[train["job_id"]] == "FAILED", st
    attempts = json.loads((Path(train["folder"]) / "attempts.json").read_text())
    assert attempts == {"starts": 2, "requeues": 1}, attempts
    status = nesyseq("status", run_dir).stdout
    line = [ln for ln in status.splitlines() if ln.startswith("train")][0]
    assert re.search(r"FAILED\s+1\s+nesyseq: not requeued: the limit of 1 requeue", line), status


def _run_native(argv, save_dir, cwd, **changes):
    """fairseq-train outside SLURM with some options changed (e.g. --update-freq 2)."""
    argv = list(argv)
    argv[argv.index("--save-dir") + 1] = str(save_dir)
    for opt, val in changes.items():
        argv[argv.index(opt) + 1] = str(val)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    subprocess.run(argv, check=True, capture_output=True, env=env, cwd=cwd)


@pytest.mark.slow
def test_two_task_gloo_matches_one_process_and_resumes(slurm_cluster, prepared, tmp_path):
    """2 SLURM tasks (gloo, fairseq's own SLURM init, --distributed-port), preempted (USR2) and
    requeued mid-run, == 1 process with --update-freq 2 (the same total batch: rank r takes
    batch 2k+r, the single process takes both in one update).  After the requeue every rank
    reloads checkpoint_last.pt itself (--load-checkpoint-on-all-dp-ranks: torch.load with
    weights_only=True and our safe globals).  Tolerance atol 1e-6: the only difference is the
    order of a two-term gradient sum (all-reduce vs accumulation), exact or last-bit in fp32; a
    wrong world size, a missing all-reduce, a doubled gradient or a rank that resumes from the
    wrong state differ by > 1e-4 (the test compares weights after 40 updates).  The bitwise
    resume check of one task is test_requeue_resume_matches_uninterrupted; this one ran an
    uninterrupted 2-task reference too until the suite had to fit in 10 minutes (the resumed
    run equalled it bitwise, and it equalled the single process within 1e-6)."""
    dist = [*TINY, "max_update=40", "save_interval_updates=5", "max_tokens=400", "save_interval=1000",
            "world_size=2", "distributed_backend=gloo", "ddp_backend=legacy_ddp"]
    pre_dir = with_prepared(tmp_path / "dist_requeued", prepared)
    nesyseq("launch", "math", *dist, "distributed_port=29612", "--tasks-per-node", "2", "--run-dir", pre_dir,
            "--stages", "train")
    rec = [r for r in jobs(pre_dir) if r["stage"] == "train"][0]
    train = Path(rec["folder"])
    ckpt = train / "checkpoints" / "checkpoint_last.pt"
    t0 = time.time()
    while not ckpt.exists():
        assert time.time() - t0 < 180, "no checkpoint_last.pt"
        time.sleep(0.1)
    subprocess.run(["scancel", "--signal=USR2", rec["job_id"]], check=True)
    wait_done(rec["folder"])
    wait_jobs([rec["job_id"]], timeout=240)
    log = (train / "stage.log").read_text()
    m = re.search(r"Loaded checkpoint .* \(epoch \d+ @ (\d+) updates\)", log)
    assert m and log.count("=== start") == 2, log[-3000:]
    resumed_at = int(m.group(1))
    rank1 = (train / "stage.rank1.log").read_text()
    assert "distributed init (rank 1)" in rank1 or "rank 1" in rank1
    model2, updates2, _ = final_checkpoint(ckpt)
    assert updates2 == 40 and 0 < resumed_at < 40

    argv = shlex.split((train / "command.txt").read_text())
    single = dict(**{"--distributed-world-size": 1, "--update-freq": 2, "--distributed-port": 0})
    _run_native(argv, tmp_path / "one", tmp_path, **single)
    model1, updates1, _ = final_checkpoint(tmp_path / "one" / "checkpoint_last.pt")
    assert updates1 == 40
    for k in model1:
        torch.testing.assert_close(model2[k], model1[k], atol=1e-6, rtol=0)


@pytest.mark.slow
def test_hydra_submitit_slurm_sweep(slurm_cluster, prepared, tmp_path):
    """docs/slurm.md's sweep: fairseq-hydra-train -m with configs/math_tp_transformer.yaml,
    hydra/launcher=submitit_slurm, two seeds -> two SLURM jobs (sacct: COMPLETED), each
    training with its own seed into its own absolute save_dir."""
    data = prepared / "data" / "bin"
    sweep = tmp_path / "sweep"
    cmd = [str(Path(sys.executable).parent / "fairseq-hydra-train"), "-m", "--config-name", "math_tp_transformer",
           "hydra/launcher=submitit_slurm", "model=tp_transformer_tiny", f"task.data={data}",
           f"common.user_dir={REPO / 'user_dir'}", "common.cpu=true", "common.log_interval=1",
           "checkpoint.save_dir=${hydra:sweep.dir}/${hydra:sweep.subdir}/checkpoints",
           "optimization.max_update=3", "dataset.batch_size=8", "dataset.num_workers=0",
           "common.seed=1,2", f"hydra.sweep.dir={sweep}",
           "hydra.launcher.timeout_min=10", "hydra.launcher.cpus_per_task=1"]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=480)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Submitit 'slurm' sweep output dir" in proc.stdout + proc.stderr
    # one SLURM array, one member per sweep point (submitit's logs are named JOBID_TASK_log.out)
    job_ids = sorted({"_".join(p.name.split("_")[:2]) for p in (sweep / ".submitit").rglob("*_log.out")})
    assert len(job_ids) == 2, job_ids
    # hydra returns once the results are pickled; the jobs end a moment later
    assert wait_jobs(job_ids, timeout=60) == {j: "COMPLETED" for j in job_ids}
    models = {}
    for num, seed in ((0, 1), (1, 2)):
        assert f"common.seed={seed}" in (sweep / str(num) / ".hydra" / "overrides.yaml").read_text()
        import nesyseq.plugins.checkpoint_safety  # noqa: F401
        state = torch.load(sweep / str(num) / "checkpoints" / "checkpoint_last.pt", map_location="cpu",
                           weights_only=True)
        assert state["cfg"]["common"]["seed"] == seed
        assert state["optimizer_history"][-1]["num_updates"] == 3
        assert state["cfg"]["model"]["_name"] == "tp_transformer"
        models[seed] = state["model"]
    assert any(not torch.equal(models[1][k], models[2][k]) for k in models[1])  # two seeds, two inits


def test_failure_cause_prefers_the_requeue_limit_over_the_stopped_childs_error(tmp_path):
    """No SLURM: `status`'s cause is the limit line when StageJob refused to requeue (the child
    it terminated may have printed an error of its own), else the child's last error line."""
    from nesyseq.slurm.status import failure_cause

    job = tmp_path / "train"
    job.mkdir()
    subm = tmp_path / "sub"
    subm.mkdir()
    (job / "stage.log").write_text("=== start 1 ===\nValueError: bad vocabulary in dict.src.txt line 3\n")
    (subm / "7_0_log.err").write_text("submitit INFO: Job not requeued because: checkpoint function returned None.\n")
    assert failure_cause(job, "7", str(subm)).startswith("submitit INFO: Job not requeued because")
    (subm / "7_0_log.err").unlink()
    assert failure_cause(job, "7", str(subm)).startswith("ValueError: bad vocabulary in dict.src.txt line 3")
    (subm / "7_0_log.err").write_text("submitit INFO: Job not requeued because: checkpoint function returned None.\n")
    with open(job / "stage.log", "a") as f:
        f.write("KeyboardInterrupt\nnesyseq: not requeued: the limit of 2 requeue(s) is reached (--max-requeue; 3 start(s))\n")
    assert failure_cause(job, "7", str(subm)).startswith("nesyseq: not requeued: the limit of 2 requeue(s)")


def test_a_failed_local_stage_still_writes_the_whole_jobs_record(tmp_path):
    """--executor local, a stage that fails: the launch exits with the stage named, and jobs.json
    has the same keys as after a finished launch (git commit, executor), so `status` and a later
    look at the run know which code ran; it lists every job from the start, the ones after the
    failed stage as not started."""
    run_dir = tmp_path / "failing"
    proc = nesyseq("launch", "qa", "task=99", "--executor", "local", "--run-dir", run_dir, check=False)
    assert proc.returncode != 0 and "stage prepare failed" in proc.stderr, proc.stderr
    record = json.loads((run_dir / "jobs.json").read_text())
    assert record["experiment"] == "qa" and record["executor"] == "local"
    assert record["git_commit"] and record["git_commit"] == (Path(record["jobs"][0]["folder"]) / "git_commit.txt").read_text().strip()
    assert [(r["stage"], r["state"]) for r in record["jobs"]] == [("prepare", "FAILED"), ("train", "NOT STARTED"),
                                                                  ("evaluate", "NOT STARTED")]
    status = nesyseq("status", run_dir, check=False).stdout
    assert "FAILED" in status and status.count("NOT STARTED") == 2, status
