"""configs/experiments/*.yaml, the chains `nesyseq launch` runs: every stage's command must be
one its program accepts (the experiments other than math were written before their commands
existed and drifted from them: a training folder that prepare does not write, an option the
model lacks, an evaluation without its input files), and the QA chain runs end to end.
No SLURM needed: plans are built in-process, the QA chain runs with --executor local."""
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nesyseq.slurm.experiment import build_plan, experiment_names

REPO = Path(__file__).resolve().parents[1]
# the keys an experiment leaves to the user (???), with any value of the right kind
REQUIRED = {"wmt": ["corpus=/data/wmt"], "folnet_lm": ["corpus=/data/lm"]}


def _accepts(argv, tmp_path):
    """Parse ``argv`` with the parser of the program it names, as the program would (SystemExit
    on an unknown option or a missing required one)."""
    prog = Path(argv[0]).name
    if prog == "nesyseq":
        from nesyseq.cli.main import build_parser, selected_command

        build_parser(only=[selected_command(argv[1:])]).parse_args(argv[1:])
        return
    from fairseq import options

    parsers = {"fairseq-train": options.get_training_parser, "fairseq-preprocess": options.get_preprocessing_parser,
               "fairseq-eval-lm": options.get_eval_lm_parser}
    assert prog in parsers, f"no parser for {prog} in this test"
    if prog == "fairseq-preprocess":
        parsers[prog]().parse_args(argv[1:])
    else:
        options.parse_args_and_arch(parsers[prog](), input_args=argv[1:])


@pytest.mark.parametrize("name", experiment_names())
def test_every_stage_command_is_accepted_by_its_program(name, tmp_path):
    plan = build_plan(name, REQUIRED.get(name, []), tmp_path / "run", "seed=1,2")
    argvs = [job.argv for jobs in plan.stages for job in jobs]
    assert len(argvs) >= 3, name
    for argv in argvs:
        try:
            _accepts(argv, tmp_path)
        except SystemExit as exc:
            pytest.fail(f"{name}: {Path(argv[0]).name} rejects {' '.join(argv[1:])} (exit {exc.code})")


def test_stages_read_what_the_stage_before_writes(tmp_path):
    """The QA and WMT chains: training reads the folder prepare writes its binaries to, and the
    QA evaluation reads prepare's raw test files (checked on the paths, since --dry-run runs nothing)."""
    qa = build_plan("qa", [], tmp_path / "q", None)
    prep, train, ev = (jobs[0].argv for jobs in qa.stages)
    out = Path(prep[prep.index("--out") + 1])
    assert train[1] == str(out / "bin" / "task2")
    assert [a for a in ev if a.endswith(".txt")] == [str(out / "raw" / f"qa2_{s}.txt")
                                                  for s in ("test", "test_rooms", "test_objects", "test_people")]
    wmt = build_plan("wmt", REQUIRED["wmt"], tmp_path / "w", None)
    prep, train, ev = (jobs[0].argv for jobs in wmt.stages)
    assert train[1] == prep[prep.index("--out") + 1] == ev[ev.index("--data") + 1]


def test_armed_stages_run_once_per_value_and_read_their_own_arm(tmp_path):
    """``arms: t2_relative_table`` in qa_tp_curriculum: with "keep zero" the warm start and task 2
    run once per table for each seed (folders KEY=VALUE under the member's), each task-2 arm
    starts from its own warm-start file, task 1 and the evaluation stay one job per seed and the
    evaluation lists every table; with one table, one arm."""
    plan = build_plan("qa_tp_curriculum", ["t2_relative_table=keep zero"], tmp_path / "r", "seed=0,1")
    by_stage = {jobs[0].stage: jobs for jobs in plan.stages}
    assert [len(by_stage[s]) for s in ("prepare", "train_task1", "warm_start", "train_task2", "evaluate")] == [1, 2, 4, 4, 2]
    run = tmp_path / "r"
    for stage in ("warm_start", "train_task2"):
        got = [(j.folder, j.array_value) for j in by_stage[stage]]
        assert got == [(run / stage / f"seed={s}" / f"t2_relative_table={t}", {"seed": str(s), "t2_relative_table": t})
                       for s in (0, 1) for t in ("keep", "zero")]
    for w, t in zip(by_stage["warm_start"], by_stage["train_task2"]):
        table = w.argv[w.argv.index("--relative-table") + 1]
        assert table == w.folder.name.split("=")[1]          # one table per arm, not the list
        assert t.argv[t.argv.index("--finetune-from-model") + 1] == str(w.folder / "start.pt")
        assert w.argv[w.argv.index("--checkpoint") + 1] == str(run / "train_task1" / w.folder.parent.name /
                                                              "checkpoints" / "checkpoint_best.pt")
    ev = by_stage["evaluate"][1].argv
    task2 = ev[[i for i, a in enumerate(ev) if a.startswith("model=tp_transformer_tiny_sym,task=2")][0]]
    assert "arms=keep zero," in task2
    assert f"ckpt={run}/train_task2/seed=1/t2_relative_table={{arm}}/checkpoints/checkpoint_best.pt" in task2
    one = build_plan("qa_tp_curriculum", ["t2_relative_table=keep"], tmp_path / "r", "seed=0")
    assert [j.folder.name for jobs in one.stages for j in jobs if j.stage == "train_task2"] == ["t2_relative_table=keep"]
    # the defaults (since 2026-11-28): both tables, 64 buckets, 30,000 task-2 updates
    default = {jobs[0].stage: jobs for jobs in build_plan("qa_tp_curriculum", [], tmp_path / "r", "seed=0").stages}
    assert [j.folder.name for j in default["train_task2"]] == ["t2_relative_table=keep", "t2_relative_table=zero"]
    for j in default["train_task2"] + default["train_task1"]:
        assert j.argv[j.argv.index("--encoder-relative-buckets") + 1] == "64"
    assert default["train_task2"][0].argv[default["train_task2"][0].argv.index("--max-update") + 1] == "30000"


def test_bad_arms_are_refused_naming_the_file_and_stage(tmp_path):
    from nesyseq.common.errors import UserError

    for override, words in (("t2_relative_table=keep keep", "names keep twice"),
                            ("t2_relative_table=", "is empty")):
        with pytest.raises(UserError, match=re.escape(words)) as err:
            build_plan("qa_tp_curriculum", [override], tmp_path / "r", None)
        assert "qa_tp_curriculum.yaml: stage warm_start" in str(err.value)
    yaml = tmp_path / "x.yaml"
    yaml.write_text("a: 1\nstages:\n  - name: s\n    arms: b\n    argv: [echo, hi]\n")
    with pytest.raises(UserError, match=r"x\.yaml: stage s: arms: 'b' is not a key"):
        build_plan(str(yaml), [], tmp_path / "r", None)


@pytest.mark.slow  # three processes: generate + binarise, 3 epochs of smn, the evaluation
def test_qa_experiment_runs_end_to_end_locally(tmp_path):
    run_dir = tmp_path / "qa run"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # KEY=VALUE both before and after the options (main.py hands the late ones to launch)
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "launch", "qa", "train_stories=60",
                        "--executor", "local", "--run-dir", str(run_dir), "test_stories=10", "max_epoch=3",
                        "ls_epochs=1"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads((run_dir / "evaluate" / "results" / "qa_external.json").read_text())
    by_file = {Path(x["file"]).name: x for x in results}
    assert sorted(by_file) == ["qa2_test.txt", "qa2_test_objects.txt", "qa2_test_people.txt", "qa2_test_rooms.txt"]
    meta = json.loads((run_dir / "prepare" / "data" / "bin" / "task2" / "qa_meta.json").read_text())
    assert meta["train_stories"] == 60 and meta["test_stories"] == 10
    # the generator's zero-shot splits: 6 new rooms, 6 new objects, a second set of 4 names
    assert [len(by_file[f"qa2_{s}.txt"]["unseen_words"]) for s in ("test", "test_rooms", "test_objects")] == [0, 6, 6]
    assert len(by_file["qa2_test_people.txt"]["unseen_words"]) == 4
    log = (run_dir / "train" / "stage.log").read_text()
    assert "num_updates" in log and "memn2n_step" in (run_dir / "train" / "command.txt").read_text()
    # nesyseq collect reads the evaluation's CSV: one row per test file, its error from the json
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "collect", str(run_dir)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    md = (run_dir / "collect.md").read_text().splitlines()
    rows = {Path(ln.split(" | ")[0].lstrip("| ")).name: ln for ln in md if ln.startswith("| /")}
    assert sorted(rows) == sorted(by_file)
    for name, x in by_file.items():
        assert f"| {x['error']:.4g} ± 0 |" in rows[name], (rows[name], x["error"])


@pytest.mark.slow  # generate, task 1, warm start, task 2, evaluation: five processes, tiny budgets
def test_qa_tp_curriculum_runs_end_to_end_locally(tmp_path):
    """The curriculum chain on a 2-seed array with task 2 from two tables ("zero keep"): each
    task-2 arm trains from its own warm-start file (task 1's weights, the third and fourth encoder
    layers copies of the second, the relative table zeroed or kept), the evaluation reports task 1,
    each arm, and as the model's row the arm whose checkpoint has the lower valid loss (the first
    listed on a tie), and `nesyseq collect` averages each row over the seeds."""
    run_dir = tmp_path / "curriculum"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "launch", "qa_tp_curriculum", "--executor", "local",
                        "--run-dir", str(run_dir), "--array", "seed=0,1", "train_stories=40", "test_stories=8",
                        "num_names=4", "t1_updates=6", "t2_updates=4", "relative_buckets=6",
                        "t2_encoder_layers=4", "t2_relative_table=zero keep"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    # nesyseq collect: one row per task over the two seeds (seed and ckpt name the member)
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "collect", str(run_dir)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    import torch
    import nesyseq.plugins.checkpoint_safety  # noqa: F401

    def best(s, table):   # an arm's checkpoint_best, read here, not by the evaluation
        return run_dir / "train_task2" / f"seed={s}" / f"t2_relative_table={table}" / "checkpoints" / "checkpoint_best.pt"

    errors, losses = {}, {}
    for s in (0, 1):
        rows = list(csv.DictReader((run_dir / "evaluate" / f"seed={s}" / "results" / "qa_results.csv").read_text().splitlines()))
        assert [(r["model"], r["task"]) for r in rows] == [("tp_transformer_tiny_sym", "1"), ("tp_transformer_tiny_sym", "2"),
                                                            ("tp_transformer_tiny_sym_zero", "2"), ("tp_transformer_tiny_sym_keep", "2")]
        arm_loss = {t: torch.load(best(s, t), weights_only=True)["extra_state"]["val_loss"] for t in ("zero", "keep")}
        chosen = "keep" if arm_loss["keep"] < arm_loss["zero"] else "zero"   # zero is listed first: it wins a tie
        assert rows[1]["ckpt"] == str(best(s, chosen)) and rows[1]["error"] == rows[2 if chosen == "zero" else 3]["error"]
        assert [r["ckpt"] for r in rows[2:]] == [str(best(s, "zero")), str(best(s, "keep"))]
        for row in rows:
            errors.setdefault((row["model"], row["task"]), []).append(float(row["error"]))
            losses.setdefault((row["model"], row["task"]), []).append(float(row["valid_loss"]))
    got = {(row["model"], row["task"]): row for row in csv.DictReader((run_dir / "collect.csv").read_text().splitlines())}
    assert sorted(got) == sorted(errors) and "seed" not in got[("tp_transformer_tiny_sym", "1")]
    assert "ckpt" not in got[("tp_transformer_tiny_sym", "1")]
    for key, errs in errors.items():
        assert got[key]["members"] == "2" and float(got[key]["error_mean"]) == pytest.approx(sum(errs) / 2, abs=1e-4)
    # collect.md names, per task, the seed of lowest valid loss (the first on a tie) and its error
    md = (run_dir / "collect.md").read_text().split("Member with the lowest valid_loss")[1].splitlines()
    head = next(ln for ln in md if ln.startswith("| model"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    picked = {}
    for ln in md[md.index(head) + 2:]:
        if ln.startswith("|"):
            cells = dict(zip(cols, (c.strip() for c in ln.strip("|").split("|"))))
            picked[(cells["model"], cells["task"])] = cells
    assert sorted(picked) == sorted(losses)
    for key, ls in losses.items():
        first = ls.index(min(ls))
        assert picked[key]["member"].split(" (tied with ")[0] == f"seed={first}"   # the first on a tie
        assert float(picked[key]["error"]) == pytest.approx(errors[key][first], abs=1e-3)
    t1_state = torch.load(run_dir / "train_task1/seed=0/checkpoints/checkpoint_best.pt", weights_only=True)
    t1 = t1_state["model"]
    for table in ("zero", "keep"):
        arm = f"seed=0/t2_relative_table={table}"
        warm = (run_dir / "warm_start" / arm / "stage.log").read_text()
        assert "encoder layers: 2 -> 4" in warm and "new (" in warm
        assert ("relative-position table zeroed" in warm) == (table == "zero")
        log = (run_dir / "train_task2" / arm / "stage.log").read_text()
        assert f"Loaded checkpoint {run_dir / 'warm_start' / arm / 'start.pt'}" in log
        assert re.search(r"num_updates 4\b", log) and not re.search(r"num_updates [5-9]\b", log)   # task 2's own count
        start = torch.load(run_dir / "warm_start" / arm / "start.pt", weights_only=True)["model"]
        key = "encoder.layers.1.ff.fc1.weight"   # task 1's top layer, and the grown third and fourth
        assert all(torch.equal(start[key.replace(".1.", f".{i}.")], t1[key]) for i in (1, 2, 3))
        table_w = start["encoder.relative_bias.table.weight"]
        assert not table_w.any() if table == "zero" else torch.equal(table_w, t1["encoder.relative_bias.table.weight"])
        ck = torch.load(best(0, table), weights_only=True)
        assert any(k.startswith("encoder.layers.3.") for k in ck["model"]) and ck["cfg"]["model"]["encoder_layers"] == 4
        assert ck["cfg"]["model"]["encoder_relative_buckets"] == 6   # relative_buckets reaches both training stages
    assert t1_state["cfg"]["model"]["encoder_relative_buckets"] == 6
