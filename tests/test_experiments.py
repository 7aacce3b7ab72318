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
REQUIRED = {"wmt": ["corpus=/data/wmt"], "folnet_lm": ["corpus=/data/lm"], "qa_table2": ["babi_dir=/data/babi/en-10k"],
            # one task, every model: its 20 tasks x 2 seeds would be 80 parses of the same options
            "qa_table1": ["babi_dir=/data/babi/en", "task=3", "model=stpr_sm,tpr_sm,stpr,tpr,memnet,smn"]}


def _accepts(argv, tmp_path):
    """Parse ``argv`` with the parser of the program it names, as the program would (SystemExit
    on an unknown option or a missing required one)."""
    from fairseq import options

    prog = Path(argv[0]).name
    if prog == "nesyseq":
        from nesyseq.cli.main import build_parser, selected_command

        args = build_parser(only=[selected_command(argv[1:])]).parse_args(argv[1:])
        if argv[1] == "train":   # nesyseq train's own options, then fairseq-train's command line
            assert args.fairseq_args and not args.fairseq_args[0].startswith("-"), argv
            options.parse_args_and_arch(options.get_training_parser(), input_args=args.fairseq_args)
        return

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


def choose_out(job):
    return Path(job.argv[job.argv.index("--out") + 1])


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
    choose = by_stage["choose_task2"][1].argv    # every table of seed 1, in the order listed
    assert choose[choose.index("--arms") + 1] == "keep zero"
    assert choose[choose.index("--checkpoint") + 1] == f"{run}/train_task2/seed=1/t2_relative_table={{arm}}/checkpoints/checkpoint_best.pt"
    ev = by_stage["evaluate"][1].argv               # task 1 and the chosen table's link
    i = ev.index("--checkpoint")
    assert ev[i + 1:i + 3] == [str(run / "train_task1" / "seed=1" / "checkpoints" / "checkpoint_best.pt"),
                               str(choose_out(by_stage["choose_task2"][1]) / "checkpoint_best.pt")]
    one = build_plan("qa_tp_curriculum", ["t2_relative_table=keep"], tmp_path / "r", "seed=0")
    assert [j.folder.name for jobs in one.stages for j in jobs if j.stage == "train_task2"] == ["t2_relative_table=keep"]
    # the defaults (since 2026-11-28): both tables, 64 buckets, 30,000 task-2 updates
    default = {jobs[0].stage: jobs for jobs in build_plan("qa_tp_curriculum", [], tmp_path / "r", "seed=0").stages}
    assert [j.folder.name for j in default["train_task2"]] == ["t2_relative_table=keep", "t2_relative_table=zero"]
    for j in default["train_task2"] + default["train_task1"]:
        assert j.argv[j.argv.index("--encoder-relative-buckets") + 1] == "64"
    assert default["train_task2"][0].argv[default["train_task2"][0].argv.index("--max-update") + 1] == "30000"


BABI_WORDS = ["mary", "john", "sandra", "daniel", "fred", "bill", "jeff", "kitchen", "bedroom", "office", "garden",
              "hallway", "bathroom", "apple", "football", "milk"]   # bAbI's people, rooms and objects


def test_qa_table2_recipe_is_the_default_and_recipes_are_overrides(tmp_path):
    """qa_table2's train stage with no override is the list-free recipe: stpr_babi, entity dropout 0.2
    with the initial-alpha read-out, one symbolic-position row per role, story dropout 0.3 and
    per-type dropout 0.3 over the word classes prepare writes (no word named), with the training
    set-up of the QA runs; recipe=listed names bAbI's people; rooms; objects (written out here);
    recipe=shared and recipe=paper are the weaker recipes."""
    def train_argv(*over):
        plan = build_plan("qa_table2", ["babi_dir=/data/babi/en-10k", *over], tmp_path / "r", "seed=0,1")
        jobs = {jobs[0].stage: jobs for jobs in plan.stages}
        assert [len(jobs[s]) for s in ("prepare", "zero_shot", "train", "evaluate")] == [1, 1, 2, 2]
        return jobs["train"][1].argv

    def recipe_of(words, groups):
        return ["--entity-dropout", "0.2", "--entity-dropout-init-alpha", "--symbolic-positions-per-role",
                "--entity-dropout-story", "0.3", "--entity-dropout-words", words, "--entity-dropout-type", "0.3",
                "--entity-dropout-groups", groups]
    argv = train_argv()
    classes = "@" + str(tmp_path / "r" / "prepare" / "data" / "bin" / "task2" / "word_classes.txt")
    i = argv.index("--arch")
    assert argv[i:i + 16] == ["--arch", "stpr_babi", "--adam-betas", "(0.9,0.99)", *recipe_of(classes, classes)]
    assert not set(BABI_WORDS) & set(",".join(argv).replace(";", ",").split(","))
    setup = " ".join(argv)
    for opt in ("--optimizer adam --lr 0.001 --clip-norm 5.0 --batch-size 32 --max-update 32000",
                "--lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5 --lr-patience 10", "--seed 1 "):
        assert opt in setup
    assert argv[1] == str(tmp_path / "r" / "prepare" / "data" / "bin" / "task2")
    listed = train_argv("recipe=listed")
    words, groups = ",".join(BABI_WORDS), ";".join([",".join(BABI_WORDS[:7]), ",".join(BABI_WORDS[7:13]), ",".join(BABI_WORDS[13:])])
    assert listed[i:i + 16] == ["--arch", "stpr_babi", "--adam-betas", "(0.9,0.99)", *recipe_of(words, groups)]
    paper = train_argv("recipe=paper")
    assert not [a for a in paper if a.startswith(("--entity", "--symbolic"))]
    shared = train_argv("recipe=shared")
    assert "--symbolic-positions" in shared and "--symbolic-positions-per-role" not in shared
    assert "--entity-dropout-type" not in shared and shared[shared.index("--entity-dropout-words") + 1] == words
    for part, flag in (("story", "--entity-dropout-story"), ("type", "--entity-dropout-type"),
                       ("init_alpha", "--entity-dropout-init-alpha")):   # the ablation: one part off each
        off = train_argv(f"recipe=classes_no_{part}")
        assert flag not in off and "--entity-dropout" in off, part
    spare = train_argv("recipe=classes_spare_slots")
    at = spare.index("--symbolic-spare-slots")
    assert spare[at + 1] == "16" and spare[:at] + spare[at + 2:] == train_argv("recipe=classes")


@pytest.mark.parametrize("words, named", [(["recipe=table3"], "recipe=table3: not one of classes, classes_no_story"),
                                          (["no_such_key=1"], "has no key 'no_such_key'"),
                                          (["--array", "sead=0,1"], "--array sead=...")])
def test_bad_overrides_are_refused_before_any_work(tmp_path, words, named):
    """A wrong KEY=VALUE or array key: one line naming it, exit 2, and no run folder written."""
    run_dir = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "launch", "qa_table2", "babi_dir=/nowhere",
                        "--executor", "local", "--run-dir", str(run_dir), *words], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and named in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not run_dir.exists()


def test_qa_names_array_over_name_counts_gives_each_member_its_data(tmp_path):
    """qa_names with --array num_names=10,1000: one data set per member, trained and evaluated on its
    own, labelled with its name count; the model's options come from its entry in `models`."""
    plan = build_plan("qa_names", ["model=tp_transformer_tiny_sym"], tmp_path / "r", "num_names=10,1000")
    prep, train, ev = plan.stages
    for p, t, e, n in zip(prep, train, ev, (10, 1000)):
        data = tmp_path / "r" / "prepare" / f"num_names={n}" / "data"
        assert p.argv[p.argv.index("--out") + 1] == str(data) and p.argv[p.argv.index("--num-names") + 1] == str(n)
        assert t.argv[1] == str(data / "bin" / "task1")
        i = t.argv.index("--arch")
        assert t.argv[i:i + 4] == ["--arch", "tp_transformer_tiny", "--symbolic-embeddings", "--symbolic-output"]
        assert [e.argv[e.argv.index(f) + 1] for f in ("--names", "--checkpoint", "--data")] == [
            str(n), f"{t.folder}/checkpoints/checkpoint_best.pt", f"{data}/bin/task1"]
    from nesyseq.common.errors import UserError

    with pytest.raises(UserError, match="model=lstm: 'lstm' is not one of memnet, smn"):
        build_plan("qa_names", ["model=lstm"], tmp_path / "r", None)


def test_qa_zero_shot_evaluates_every_split_of_the_data_it_trained_on(tmp_path):
    plan = build_plan("qa_zero_shot", ["model=tpr_rnn", "extra=[--entity-dropout,0.2]"], tmp_path / "r", "seed=3")
    prep, train, ev = (jobs[0] for jobs in plan.stages)
    data = tmp_path / "r" / "prepare" / "data" / "bin" / "task2"
    assert prep.argv[prep.argv.index("--zero-shot") + 1] == "rooms,objects,people" and train.argv[1] == str(data)
    i = train.argv.index("--arch")
    assert train.argv[i:i + 6] == ["--arch", "tpr_rnn_babi", "--adam-betas", "(0.9,0.99)", "--entity-dropout", "0.2"]
    ckpt = train.folder / "checkpoints" / "checkpoint_best.pt"
    assert "--zero-shot" in ev.argv      # test and every test_* subset of the data folder (tests/test_qa_select.py)
    assert [ev.argv[ev.argv.index(f) + 1] for f in ("--model", "--seed", "--checkpoint", "--data")] == [
        "tpr_rnn", "3", str(ckpt), str(data)]


def test_curriculum_relative_tables_are_checked_before_any_work(tmp_path):
    from nesyseq.common.errors import UserError

    for bad, word in (("keep zeros", "'zeros'"), ("zero kept", "'kept'")):
        with pytest.raises(UserError, match=re.escape(f"t2_relative_table={bad}: {word} is not one of keep, zero, zero-near")):
            build_plan("qa_tp_curriculum", [f"t2_relative_table={bad}"], tmp_path / "r", "seed=0")
    with pytest.raises(UserError, match="'nope' is not one of"):   # an array member is checked too
        build_plan("qa_tp_curriculum", [], tmp_path / "r", "t2_relative_table=keep,nope")
    # both training stages stop early at stop_bits through nesyseq train; stop_bits= trains to the budget
    from nesyseq.cli.main import build_parser

    parser = build_parser(only=[("train", None)])
    for over, bound in (([], 0.008), (["stop_bits="], None), (["stop_bits=0.05"], 0.05)):
        plan = build_plan("qa_tp_curriculum", over, tmp_path / "r", "seed=0")
        trains = [jobs[0].argv for jobs in plan.stages if jobs[0].stage.startswith("train_")]
        assert len(trains) == 2
        for argv, task in zip(trains, (1, 2)):
            args = parser.parse_args(argv[1:])
            assert args.stop_at_best == bound and args.fairseq_args[0] == f"{tmp_path / 'r'}/prepare/data/bin/task{task}"


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
    head = [c.strip() for c in next(ln for ln in md if ln.startswith("| file")).strip("|").split("|")]
    rows = {Path(ln.split(" | ")[0].lstrip("| ")).name: dict(zip(head, (c.strip() for c in ln.strip("|").split("|"))))
            for ln in md if ln.startswith("| /")}
    assert sorted(rows) == sorted(by_file)
    for name, x in by_file.items():   # one member: its value as it is, no "± 0"; counts as whole numbers
        assert rows[name]["error (%)"] == f"{x['error']:.4g}", (rows[name], x["error"])
        assert rows[name]["questions"] == str(x["questions"]) and rows[name]["tokens"] == str(x["tokens"])
    assert rows["qa2_test.txt"]["test"] == "original" and rows["qa2_test_rooms.txt"]["test"] == "zero-shot rooms"


@pytest.mark.slow  # generate, task 1, warm start, task 2, evaluation: five processes, tiny budgets
def test_qa_tp_curriculum_runs_end_to_end_locally(tmp_path):
    """The curriculum chain on one seed with task 2 from two tables ("zero keep"): each task-2 arm
    trains from its own warm-start file (task 1's weights, the third and fourth encoder layers
    copies of the second, the relative table zeroed or kept), the evaluation reports task 1, each
    arm, and as the model's row the arm whose checkpoint has the lower valid loss (the first listed
    on a tie), and `nesyseq collect` reads the rows (its averaging over seeds and its pick of the
    lowest valid loss are test_collect_select's)."""
    run_dir = tmp_path / "curriculum"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "launch", "qa_tp_curriculum", "--executor", "local",
                        "--run-dir", str(run_dir), "--array", "seed=0", "train_stories=40", "test_stories=8",
                        "num_names=4", "t1_updates=6", "t2_updates=4", "relative_buckets=6",
                        "t2_encoder_layers=4", "t2_relative_table=zero keep"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    # nesyseq collect: one row per model and task (seed and ckpt name the member)
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "collect", str(run_dir)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    import torch
    import nesyseq.plugins.checkpoint_safety  # noqa: F401

    def best(s, table):   # an arm's checkpoint_best, read here, not by the evaluation
        return run_dir / "train_task2" / f"seed={s}" / f"t2_relative_table={table}" / "checkpoints" / "checkpoint_best.pt"

    errors = {}
    for s in (0,):
        rows = list(csv.DictReader((run_dir / "evaluate" / f"seed={s}" / "results" / "qa_results.csv").read_text().splitlines()))
        assert [(r["model"], r["task"]) for r in rows] == [("tp_transformer_tiny_sym", "1"), ("tp_transformer_tiny_sym", "2"),
                                                            ("tp_transformer_tiny_sym_zero", "2"), ("tp_transformer_tiny_sym_keep", "2")]
        arm_loss = {t: torch.load(best(s, t), weights_only=True)["extra_state"]["val_loss"] for t in ("zero", "keep")}
        chosen = "keep" if arm_loss["keep"] < arm_loss["zero"] else "zero"   # zero is listed first: it wins a tie
        assert rows[1]["ckpt"] == str(run_dir / "choose_task2" / f"seed={s}" / "checkpoint_best.pt")   # the link
        assert rows[1]["error"] == rows[2 if chosen == "zero" else 3]["error"]
        assert [r["ckpt"] for r in rows[2:]] == [str(best(s, "zero")), str(best(s, "keep"))]
        # the choose_task2 stage made the same choice, from the checkpoints alone
        choice = json.loads((run_dir / "choose_task2" / f"seed={s}" / "arm_choice.json").read_text())
        assert choice["chosen"] == chosen and choice["valid_loss"] == arm_loss
        assert os.path.realpath(run_dir / "choose_task2" / f"seed={s}" / "checkpoint_best.pt") == str(best(s, chosen))
        for row in rows:
            errors.setdefault((row["model"], row["task"]), []).append(float(row["error"]))
    got = {(row["model"], row["task"]): row for row in csv.DictReader((run_dir / "collect.csv").read_text().splitlines())}
    assert sorted(got) == sorted(errors) and "seed" not in got[("tp_transformer_tiny_sym", "1")]
    assert "ckpt" not in got[("tp_transformer_tiny_sym", "1")]
    for key, errs in errors.items():
        assert got[key]["members"] == "1" and float(got[key]["error_mean"]) == pytest.approx(errs[0], abs=1e-4)
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


TINY_STUDY = ["modules=numbers__place_value,comparison__pair", "per_module=60", "test_per_module=4",
              "workers=1", "max_update=8", "save_interval_updates=4", "batch_size=8", "warmup_updates=2",
              "roles_module=numbers__place_value", "arch=tp_transformer_tiny transformer_math_tiny"]


@pytest.mark.slow  # prepare, 2 arms of 8 updates, 8 small decodes, export, roles, report
def test_math_study_runs_end_to_end_locally(tmp_path):
    """The study's one command on tiny settings (one seed; resuming an interrupted training stage
    to bitwise-equal weights is the launcher's, tested on qa_table2 below): every model trains,
    every saved step is evaluated, checkpoint_best is one of them, the weights export loads in
    `evaluate math`, and the report's Table 1 is the mean over the runs' own result files."""
    run_dir = tmp_path / "study"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = _launch("math_study", "--executor", "local", "--run-dir", run_dir, "--array", "seed=1", *TINY_STUDY,
                timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    models = ("tp_transformer_tiny", "transformer_math_tiny")   # the third arm is the same stages again
    interp = {m: [] for m in models}
    for m in models:
        for seed in (1,):
            ev = run_dir / "evaluate" / f"seed={seed}" / f"arch={m}"
            steps = [int(row["steps"]) for row in csv.DictReader((ev / "steps.csv").read_text().splitlines())]
            assert steps == [4, 8]
            best = json.loads((ev / "best.json").read_text())["steps"]
            assert best in (4, 8)
            rows = list(csv.DictReader((ev / f"{m}_{best}" / "results.csv").read_text().splitlines()))
            accs = [float(x["accuracy"]) for x in rows if x["split"] == "interpolate"]
            interp[m].append(sum(accs) / len(accs))
            assert (run_dir / "export" / f"seed={seed}" / f"arch={m}" / "model.pt").stat().st_size < 5 * 2**20
    t1 = {row["model"]: row for row in csv.DictReader((run_dir / "report" / "table1.csv").read_text().splitlines())}
    for m in models:
        assert float(t1[m]["interpolate_mean"]) == pytest.approx(sum(interp[m]) / len(interp[m]), abs=1e-4)
    assert (run_dir / "roles" / "seed=1" / "roles_clusters.csv").is_file()
    assert "TP-T minus baseline" in (run_dir / "report" / "results.md").read_text()
    # `status` reads the local executor's job folders: every stage of every arm completed
    st = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "status", str(run_dir)], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=300)
    assert st.returncode == 0, st.stderr[-2000:]
    n_jobs = len(json.loads((run_dir / "jobs.json").read_text())["jobs"])
    assert n_jobs >= 9 and st.stdout.count("COMPLETED") == n_jobs, st.stdout
    # the exported fp16 weights evaluate with the stock command
    out = tmp_path / "reeval"
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "evaluate", "math", "--checkpoint",
                        str(run_dir / "export" / "seed=1" / "arch=tp_transformer_tiny" / "model.pt"),
                        "--data", str(run_dir / "prepare" / "data" / "bin"), "--out", str(out), "--cpu"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "results.csv").is_file()


def _babi_like(folder, n_train=80, n_test=10, seed=0):
    """A tiny bAbI task-2 folder in the released naming scheme, with bAbI's people, rooms and
    objects (so each zero-shot kind has words to rename)."""
    import random

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        lines = []
        for _ in range(n):
            p, q = rng.sample(["Mary", "John", "Sandra", "Daniel"], 2)
            o = rng.choice(["apple", "football", "milk"])
            r1, r2, r3 = rng.sample(["kitchen", "bedroom", "office", "garden", "hallway", "bathroom"], 3)
            lines += [f"1 {p} moved to the {r1}.", f"2 {q} went to the {r2}.", f"3 {p} picked up the {o}.",
                      f"4 {p} travelled to the {r3}.", f"5 Where is the {o}?\t{r3}\t3 4"]
        (folder / f"qa2_two-supporting-facts_{split}.txt").write_text("\n".join(lines) + "\n")
    return folder


def test_zero_shot_files_of_a_bAbI_folder_task(tmp_path):
    """prepare qa-zero-shot --babi-dir --task: the generator's names, only zero-shot files in the
    folder (the original test is not copied beside them), and each renaming changes exactly its
    kind's words (checked word by word)."""
    from nesyseq.data_prep.qa_zero_shot import make_task_zero_shot
    from nesyseq.common.errors import UserError

    babi = _babi_like(tmp_path / "en", n_train=3, n_test=4)
    out = tmp_path / "zs"
    paths = make_task_zero_shot(str(babi), "2", ["rooms", "objects", "people", "all"], str(out))
    assert [Path(p).name for p in paths] == ["qa2_test_rooms.txt", "qa2_test_objects.txt",
                                             "qa2_test_people.txt", "qa2_test_all.txt"]
    assert sorted(p.name for p in out.iterdir()) == sorted([Path(p).name for p in paths] + ["zero_shot_map.json"])
    original = (babi / "qa2_two-supporting-facts_test.txt").read_bytes()
    kinds = {"rooms": BABI_WORDS[7:13], "objects": BABI_WORDS[13:], "people": BABI_WORDS[:7]}
    kinds["all"] = BABI_WORDS
    for kind, words in kinds.items():
        new = (out / f"qa2_test_{kind}.txt").read_text().split()
        old = original.decode().split()
        assert len(new) == len(old)
        changed = {(a.strip(".?").lower(), b.strip(".?").lower()) for a, b in zip(old, new) if a != b}
        assert changed and all(a in words and b not in BABI_WORDS for a, b in changed), (kind, changed)
    with pytest.raises(UserError, match=r"qa7_counting_test\.txt: no such file \(task 7's test file\)"):
        make_task_zero_shot(str(babi), "7", ["rooms"], str(tmp_path / "zs7"))


def _launch(*words, timeout=600):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "launch", *map(str, words)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # three local launches of a tiny stpr (8 and 16 updates) and one evaluation
def test_qa_table2_runs_skips_finished_stages_and_resumes_an_interrupted_one(tmp_path):
    """qa_table2, the README's Table-2 command, on a folder holding only qa2's two files (bAbI-like,
    under the release's names): the zero-shot files and the evaluation on each; a train stage
    interrupted after its checkpoint at update 8 (no DONE.json) continues from its own
    checkpoint_last.pt to 16 updates with the weights of an uninterrupted 16-update run (one CPU
    thread: bitwise), the finished stages before it are skipped, the launch ends with the collected
    table, and a further launch skips all."""
    babi = _babi_like(tmp_path / "qa2-only")
    assert sorted(p.name for p in babi.iterdir()) == ["qa2_two-supporting-facts_test.txt",
                                                      "qa2_two-supporting-facts_train.txt"]
    run, ref = tmp_path / "run", tmp_path / "ref"
    common = ["qa_table2", "--executor", "local", f"babi_dir={babi}", "task=2", "--array", "seed=0",
              "--timeout-min", "180"]
    r = _launch(*common, "--run-dir", run, "max_update=8", "--stages", "prepare,zero_shot,train")
    assert r.returncode == 0, r.stderr[-3000:]
    train = run / "train" / "seed=0"
    (train / "DONE.json").unlink()        # what a kill after the update-8 checkpoint leaves
    logs = {s: (run / s / "stage.log").stat().st_mtime_ns for s in ("prepare", "zero_shot")}
    r = _launch(*common, "--run-dir", run, "max_update=16")
    assert r.returncode == 0, r.stderr[-3000:]
    # the launch's last words: the results table, the original test labelled as such
    table = r.stdout[r.stdout.index("| file | test | questions | error (%) |"):]
    assert "| original |" in table and "| zero-shot rooms |" in table and " ± " not in table, r.stdout
    jobs = {j["stage"]: j["job_id"] for j in json.loads((run / "jobs.json").read_text())["jobs"]}
    assert jobs["prepare"] == jobs["zero_shot"] == "skipped (complete)" and "skipped" not in jobs["train"] + jobs["evaluate"]
    assert {s: (run / s / "stage.log").stat().st_mtime_ns for s in logs} == logs
    log = (train / "stage.log").read_text()
    assert f"Loaded checkpoint {train / 'checkpoints' / 'checkpoint_last.pt'}" in log.split("=== start 2")[1]
    r = _launch(*common, "--run-dir", ref, "max_update=16", "--stages", "prepare,zero_shot,train")
    assert r.returncode == 0, r.stderr[-3000:]
    import torch
    import nesyseq.plugins.checkpoint_safety  # noqa: F401

    got = torch.load(train / "checkpoints" / "checkpoint_last.pt", weights_only=True)
    want = torch.load(ref / "train" / "seed=0" / "checkpoints" / "checkpoint_last.pt", weights_only=True)
    assert got["optimizer_history"][-1]["num_updates"] == want["optimizer_history"][-1]["num_updates"] == 16
    assert got["model"].keys() == want["model"].keys()
    assert all(torch.equal(got["model"][k], want["model"][k]) for k in got["model"])
    # the evaluation: the released test file and its four renamings, each with its unseen words
    results = json.loads((run / "evaluate" / "seed=0" / "results" / "qa_external.json").read_text())
    unseen = {Path(x["file"]).name: len(x["unseen_words"]) for x in results}
    assert unseen == {"qa2_test.txt": 0, "qa2_test_rooms.txt": 6, "qa2_test_objects.txt": 3,
                      "qa2_test_people.txt": 4, "qa2_test_all.txt": 13}
    # nesyseq collect: one row per test file (mean ± std over the array; here one member)
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "collect", str(run)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {Path(row["file"]).name: row for row in csv.DictReader((run / "collect.csv").read_text().splitlines())}
    assert sorted(rows) == sorted(unseen)
    for x in results:
        assert float(rows[Path(x["file"]).name]["error_mean"]) == pytest.approx(x["error"], abs=1e-3)
    # nothing left to do: every stage skipped, nothing rewritten
    before = (train / "checkpoints" / "checkpoint_last.pt").stat().st_mtime_ns
    r = _launch(*common, "--run-dir", run, "max_update=16")
    assert r.returncode == 0, r.stderr[-3000:]
    assert {j["job_id"] for j in json.loads((run / "jobs.json").read_text())["jobs"]} == {"skipped (complete)"}
    assert (train / "checkpoints" / "checkpoint_last.pt").stat().st_mtime_ns == before
