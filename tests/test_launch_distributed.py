"""``nesyseq launch … --gpus-per-node N``: the fairseq distributed flags the launcher renders
into the train stage's command.txt (slurm/launcher.py, distributed_settings), checked on CPU
with --dry-run.  The run itself is test_slurm.py's 2-task gloo test (CPU); multi-GPU runs need
a multi-GPU machine (docs/gpu.md)."""
import shlex
from pathlib import Path

from nesyseq.cli.main import main


def render(tmp_path, *flags, overrides=(), name="run"):
    run_dir = tmp_path / name
    rc = main(["launch", "math", *overrides, "--dry-run", "--run-dir", str(run_dir), *flags])
    assert rc == 0
    cmds = {}
    for path in sorted(run_dir.glob("train/**/command.txt")):
        argv = shlex.split(path.read_text())
        opts = {}
        for i, a in enumerate(argv):
            if a.startswith("--"):
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                opts[a] = nxt if nxt is not None and not nxt.startswith("--") else True
        cmds[path.parent.relative_to(run_dir).as_posix()] = (argv, opts)
    return cmds


def refused(capsys, tmp_path, *flags, overrides=()):
    """nesyseq's exit 2 with its one-line error; returns the message."""
    assert main(["launch", "math", *overrides, "--dry-run", "--run-dir", str(tmp_path / "refused"), *flags]) == 2
    assert not (tmp_path / "refused" / "jobs.json").exists()
    return capsys.readouterr().err


def test_one_node_eight_gpus(tmp_path):
    ((_, argv, o),) = [(k, *v) for k, v in render(tmp_path, "--gpus-per-node", "8").items()]
    assert "--cpu" not in argv
    assert o["--distributed-world-size"] == "8"
    assert o["--distributed-backend"] == "nccl" and o["--ddp-backend"] == "pytorch_ddp"
    port = int(o["--distributed-port"])
    assert 20000 <= port < 50000
    # the same folder (a requeue, a relaunch into the run) renders the same port
    ((_, o2),) = render(tmp_path, "--gpus-per-node", "8").values()
    assert o2["--distributed-port"] == str(port)


def test_two_nodes_array_members_get_their_own_ports(tmp_path):
    cmds = render(tmp_path, "--nodes", "2", "--gpus-per-node", "4", "--array", "seed=1,2")
    assert set(cmds) == {"train/seed=1", "train/seed=2"}
    ports = {o["--distributed-port"] for _, o in cmds.values()}
    assert len(ports) == 2  # two array members on one node must not share a rendezvous port
    for _, o in cmds.values():
        assert o["--distributed-world-size"] == "8"


def test_one_task_per_node_spawning_gpus(tmp_path):
    ((_, o),) = render(tmp_path, "--gpus-per-node", "4", "--tasks-per-node", "1").values()
    assert o["--distributed-world-size"] == "4"  # fairseq spawns a process per GPU in the one task


def test_cpu_defaults_unchanged_and_cpu_tasks_use_gloo(tmp_path):
    ((argv, o),) = render(tmp_path, name="single").values()
    assert "--cpu" in argv and o["--distributed-world-size"] == "1" and o["--distributed-port"] == "0"
    ((argv, o),) = render(tmp_path, "--tasks-per-node", "2", name="two").values()
    assert "--cpu" in argv and o["--distributed-world-size"] == "2" and int(o["--distributed-port"]) > 0
    assert o["--distributed-backend"] == "gloo" and o["--ddp-backend"] == "legacy_ddp"


def test_local_executor_lets_fairseq_spawn(tmp_path, capsys):
    ((argv, o),) = render(tmp_path, "--executor", "local", "--gpus-per-node", "2").values()
    assert o["--distributed-world-size"] == "2" and o["--distributed-port"] == "0"  # fairseq picks a port
    assert "--executor local" in refused(capsys, tmp_path, "--executor", "local", "--tasks-per-node", "2")


def test_user_overrides_win_and_a_wrong_world_size_is_an_error(tmp_path, capsys):
    ((argv, o),) = render(tmp_path, "--gpus-per-node", "2",
                          overrides=["distributed_port=29500", "ddp_backend=legacy_ddp"]).values()
    assert o["--distributed-port"] == "29500" and o["--ddp-backend"] == "legacy_ddp"
    err = refused(capsys, tmp_path, "--gpus-per-node", "2", overrides=["world_size=4"])
    assert "world_size=4" in err and "gives 2" in err
    assert "--tasks-per-node 3" in refused(capsys, tmp_path, "--gpus-per-node", "2", "--tasks-per-node", "3")


def test_only_keys_the_experiment_has(tmp_path):
    """An experiment yaml without the distributed keys renders as written (no stray flags)."""
    yaml = tmp_path / "plain.yaml"
    yaml.write_text("name: plain\nseed: 1\nstages:\n  - name: train\n    checkpointable: true\n"
                    "    argv: [echo, train, '${seed}']\n")
    run_dir = tmp_path / "plain"
    assert main(["launch", str(yaml), "--dry-run", "--run-dir", str(run_dir), "--gpus-per-node", "8"]) == 0
    assert (run_dir / "train" / "command.txt").read_text().split() == ["echo", "train", "1"]


def test_dry_run_needs_no_slurm_and_records_the_sbatch_parameters(tmp_path, monkeypatch):
    """--dry-run builds no executor, so it works on a machine without srun (submitit's
    SlurmExecutor refuses to start there); jobs.json records the parameters a real launch
    would give sbatch."""
    import json
    import shutil

    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(bare))                       # no srun, no sbatch, no sinfo
    ((_, o),) = render(tmp_path, "--nodes", "2", "--gpus-per-node", "4").values()
    assert o["--distributed-world-size"] == "8"
    (rec,) = [r for r in json.loads((tmp_path / "run" / "jobs.json").read_text())["jobs"] if r["stage"] == "train"]
    assert rec["job_id"] == "dry-run"
    p = rec["slurm_params"]
    assert p["nodes"] == 2 and p["ntasks_per_node"] == 4 and p["gpus_per_node"] == 4
