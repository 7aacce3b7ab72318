"""``nesyseq evaluate qa``'s seed chosen by validation loss, the arms behind a ``nesyseq
choose-arm`` link each scored with the chosen one as the model's row, and the report's labels
(evaluations/qa_eval.py).

Reference: a brute-force pick (sort each group's rows by (valid loss, position)) written
independently of ``select_by_valid``."""
import random
from pathlib import Path

import pytest

from nesyseq.evaluations.qa_eval import markdown, select_by_valid, valid_loss


def _rows(rng, n_models=2, n_tasks=3, n_seeds=4):
    rows = []
    for m in range(n_models):
        for t in range(1, n_tasks + 1):
            for s in range(n_seeds):
                rows.append({"model": f"m{m}", "task": str(t), "seed": str(s), "error": f"{rng.uniform(0, 60):.2f}",
                             # few distinct values, so ties happen
                             "valid_loss": repr(rng.choice([0.004, 0.3, 0.31, 1.02]))})
    rng.shuffle(rows)
    return rows


def _brute(rows):
    out = {}
    for i, r in enumerate(rows):
        k = (r["model"], r["task"])
        if k not in out or (float(r["valid_loss"]), i) < out[k][0]:
            out[k] = ((float(r["valid_loss"]), i), r)
    tied = {k: ",".join(sorted(r["seed"] for r in rows if (r["model"], r["task"]) == k
                               and r["valid_loss"] == v[1]["valid_loss"] and r["seed"] != v[1]["seed"]))
            for k, v in out.items()}
    return {k: (v[1]["seed"], tied[k]) for k, v in out.items()}


def test_select_by_valid_is_the_brute_force_pick():
    rng = random.Random(0)
    ties = 0
    for _ in range(50):
        rows = _rows(rng)
        got = {(r["model"], r["task"]): (r["seed"], r["tied"]) for r in select_by_valid(rows)}
        assert got == _brute(rows)
        ties += sum(bool(t) for _, t in got.values())
        for r in select_by_valid(rows):
            assert r["seeds"] == "4"
    assert ties > 0   # the random rows do exercise ties


def test_only_plain_groups_of_two_or_more_seeds_with_every_valid_loss():
    base = {"model": "m", "error": "1.00"}
    rows = [dict(base, task="1", seed="0", valid_loss="0.5"),                           # one seed: no pick
            dict(base, task="2", seed="0", valid_loss="0.5"), dict(base, task="2", seed="1", valid_loss=""),
            dict(base, task="3", seed="0", valid_loss="0.5", split="rooms"),
            dict(base, task="3", seed="1", valid_loss="0.1", split="rooms"),
            dict(base, task="4", seed="0", valid_loss="0.5", beta="0"),
            dict(base, task="4", seed="1", valid_loss="0.1", beta="0"),
            dict(base, task="5", seed="0", valid_loss="0.5"), dict(base, task="5", seed="1", valid_loss="0.2",
                                                                  error="7.25")]
    rows += [dict(base, task="6", seed="0", valid_loss="0.5"), dict(base, task="6", seed="1")]  # an older CSV's row
    # one seed on two subsets: one group per subset, each of a single seed, so no pick
    rows += [dict(base, task="7", seed="0", valid_loss="0.5", subset="test"),
             dict(base, task="7", seed="0", valid_loss="0.5", subset="valid")]
    # seed 0 also evaluated on valid: the pick is among the test rows only, with the test error
    rows += [dict(base, task="8", seed="0", valid_loss="0.1", subset="valid", error="99.00"),
             dict(base, task="8", seed="0", valid_loss="0.1", subset="test", error="1.00"),
             dict(base, task="8", seed="1", valid_loss="0.3", subset="test", error="5.00")]
    # the same seed given twice counts once: alone, no pick; beside another seed, 2 seeds compared
    rows += [dict(base, task="9", seed="0", valid_loss="0.1"), dict(base, task="9", seed="0", valid_loss="0.1"),
             dict(base, task="10", seed="0", valid_loss="0.1"), dict(base, task="10", seed="0", valid_loss="0.1"),
             dict(base, task="10", seed="1", valid_loss="0.2")]
    picked = select_by_valid(rows)
    assert [(r["task"], r["seed"]) for r in picked] == [("5", "1"), ("8", "0"), ("10", "0")]
    assert picked[1]["error"] == "1.00" and picked[1]["seeds"] == "2" and picked[2]["seeds"] == "2"
    md = markdown(rows, "bAbI-style")
    assert "| m | 5 | test | 1 | 0.200 | 7.25 | 2 |  |" in md
    assert "lowest validation loss" not in markdown(rows[:1], "bAbI-style")


def test_valid_loss_of_a_checkpoint_without_one_is_empty():
    for state, want in (({"extra_state": {"val_loss": None}}, ""), ({"extra_state": {}}, ""), ({}, ""),
                        ({"extra_state": None}, ""), ({"extra_state": {"val_loss": 0.296}}, "0.296")):
        assert valid_loss(dict(state, model={})) == want


def _evaluate(tmp_path, monkeypatch, argv, numbers):
    """``nesyseq evaluate qa ARGV --out tmp_path`` with each checkpoint's answer error and valid loss
    faked from ``numbers`` (ckpt -> (error, valid loss)); returns the rows of qa_results.csv and
    the table."""
    import csv

    from nesyseq.cli.main import main
    from nesyseq.evaluations import qa_eval

    monkeypatch.setattr(qa_eval, "answer_error", lambda ckpt, data, subset, bs, beta, cpu=True: {
        "error": numbers[(ckpt, subset)][0], "questions": 100, "valid_loss": numbers[(ckpt, subset)][1]})
    assert main(["evaluate", "qa", *argv, "--out", str(tmp_path), "--cpu"]) == 0
    rows = list(csv.DictReader((tmp_path / "qa_results.csv").read_text().splitlines()))
    return rows, (tmp_path / "qa_table.md").read_text()


def _arm_checkpoints(root, losses):
    """One small checkpoint per arm with its valid loss (extra_state, where fairseq keeps it)."""
    import torch

    for arm, loss in losses.items():
        (root / arm).mkdir(parents=True, exist_ok=True)
        torch.save({"model": {}, "cfg": {"task": {"_name": "babi_qa"}}, "extra_state": {"val_loss": loss}},
                   root / arm / "checkpoint_best.pt")
    return str(root / "{arm}" / "checkpoint_best.pt")


def test_a_chosen_arm_link_scores_every_arm_and_the_lowest_valid_loss_is_the_models_row(tmp_path, monkeypatch,
                                                                                        capsys):
    from nesyseq.cli.main import main

    rng = random.Random(1)
    arms = ["keep", "zero", "zero-near"]
    ties = 0
    for trial in range(12):
        links, numbers = [], {}
        for s in range(2):
            losses = {a: rng.choice([0.004, 0.008, 0.3]) for a in arms}
            pattern = _arm_checkpoints(tmp_path / f"t{trial}" / f"s{s}", losses)
            link = tmp_path / f"t{trial}" / f"choice{s}"
            assert main(["choose-arm", "--arms", " ".join(arms), "--checkpoint", pattern, "--out", str(link)]) == 0
            links.append(str(link / "checkpoint_best.pt"))
            for a in arms:
                numbers[(str(Path(pattern.replace("{arm}", a)).resolve()), "test")] = (rng.uniform(0, 60),
                                                                                      repr(losses[a]))
        rows, md = _evaluate(tmp_path / f"t{trial}" / "rep", monkeypatch,
                             ["--checkpoint", *links, "--seed", "0", "1", "--data", "d", "--task", "2", "--model", "m"],
                             numbers)
        assert [r["model"] for r in rows] == ["m", "m_keep", "m_zero", "m_zero-near"] * 2
        for s in range(2):
            mine = [r for r in rows if r["seed"] == str(s)]
            for r in mine[1:]:   # each arm: its own checkpoint's numbers
                assert float(r["error"]) == pytest.approx(numbers[(r["ckpt"], "test")][0], abs=0.006)
            # brute force: the first arm, in the order given, of the smallest loss
            keyed = sorted((float(mine[1 + i]["valid_loss"]), i, a) for i, a in enumerate(arms))
            best = keyed[0][2]
            ties += keyed[0][0] == keyed[1][0]
            assert mine[0]["ckpt"] == links[s] and mine[0]["error"] == mine[1 + arms.index(best)]["error"]
            assert f"| m | 2 | test | {s} | {best} |" in md
    assert ties > 0   # ties were exercised
    capsys.readouterr()


def test_zero_shot_subsets_get_their_split_and_append_builds_one_report(tmp_path, monkeypatch, capsys):
    import json

    data = tmp_path / "bin" / "task2"
    data.mkdir(parents=True)
    (data / "qa_meta.json").write_text(json.dumps({"task": 2, "examples": {"train": 9, "valid": 1, "test": 5,
                                                                           "test_rooms": 5, "test_people": 5}}))
    numbers = {("c0.pt", sub): (float(i), "0.5") for i, sub in enumerate(["test", "test_people", "test_rooms"])}
    numbers[("c1.pt", "test")] = (7.0, "0.25")
    rows, md = _evaluate(tmp_path / "rep", monkeypatch, ["--checkpoint", "c0.pt", "--seed", "0", "--data", str(data),
                                                         "--model", "m", "--zero-shot"], numbers)
    assert [(r["task"], r["split"], r["subset"], r["error"]) for r in rows] == [
        ("2", "original", "test", "0.00"), ("2", "people", "test_people", "1.00"), ("2", "rooms", "test_rooms", "2.00")]
    assert "Zero-shot error" in md
    # a second call with --append adds its row; the same labels again replace, not repeat
    for _ in range(2):
        rows, md = _evaluate(tmp_path / "rep", monkeypatch, ["--checkpoint", "c1.pt", "--seed", "1", "--data",
                                                             str(data), "--model", "m", "--append"], numbers)
        assert [(r["seed"], r["subset"]) for r in rows] == [("0", "test"), ("0", "test_people"), ("0", "test_rooms"),
                                                           ("1", "test")]
    capsys.readouterr()


@pytest.mark.parametrize("argv,words", [
    (["--checkpoint", "a.pt", "b.pt", "--seed", "0", "1", "2", "--data", "d", "--model", "m", "--task", "1"],
     "--seed: 3 values for 2 checkpoints"),
    (["--checkpoint", "a.pt", "--seed", "0", "--data", "d", "--model", "m"], "no qa_meta.json"),
    (["--checkpoint", "a.pt", "--seed", "0", "--data", "d", "--task", "1"], "--model NAME"),
    (["--checkpoint", "a.pt", "--seed", "0", "--data", "d", "--model", "m", "--zero-shot", "--task", "1"],
     "no test_* subsets"),
])
def test_bad_labels_are_one_line_errors(tmp_path, capsys, argv, words):
    from nesyseq.cli.main import main

    assert main(["evaluate", "qa", *argv, "--out", str(tmp_path / "o"), "--cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
