"""``nesyseq evaluate qa``'s seed chosen by validation loss, and the arm of a ``--run`` with
``arms=`` chosen the same way (evaluations/qa_eval.py).

Reference: a brute-force pick (sort each group's rows by (valid loss, position)) written
independently of ``select_by_valid``."""
import random
import re

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


def _evaluate_arms(tmp_path, monkeypatch, run_specs, losses):
    """``evaluate qa --run ...`` with each checkpoint's answer error and valid loss faked from
    ``losses`` (ckpt -> (error, valid loss)); returns the rows of qa_results.csv and the table."""
    import argparse
    import csv

    from nesyseq.evaluations import qa_eval

    monkeypatch.setattr(qa_eval, "answer_error", lambda ckpt, data, subset, bs, beta: {
        "error": losses[ckpt][0], "questions": 100, "valid_loss": losses[ckpt][1]})
    monkeypatch.setattr(qa_eval, "write_reports", lambda rows, out, label: _write(rows, out, label))
    args = argparse.Namespace(babi_file=None, run=run_specs, out=str(tmp_path), label="x", batch_size=8)
    assert qa_eval.run(args) == 0
    rows = list(csv.DictReader((tmp_path / "qa_results.csv").read_text().splitlines()))
    return rows, (tmp_path / "qa_table.md").read_text()


def _write(rows, out, label):
    import csv
    import io

    from nesyseq.evaluations.qa_eval import markdown

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["model", "task", "seed", "error", "ckpt", "valid_loss"], extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    (out / "qa_results.csv").write_text(buf.getvalue())
    (out / "qa_table.md").write_text(markdown(rows, label))
    return {"md": out / "qa_table.md"}


def test_arms_each_get_a_row_and_the_lowest_valid_loss_is_chosen(tmp_path, monkeypatch, capsys):
    rng = random.Random(1)
    arms = ["keep", "zero", "zero-near"]
    ties = 0
    for trial in range(30):
        losses = {f"ck/{s}/{a}.pt": (rng.uniform(0, 60), repr(rng.choice([0.004, 0.008, 0.3])))
                  for s in range(2) for a in arms}
        specs = [f"model=m,task=2,seed={s},data=d,arms={' '.join(arms)},ckpt=ck/{s}/{{arm}}.pt" for s in range(2)]
        rows, md = _evaluate_arms(tmp_path, monkeypatch, specs, losses)
        assert [r["model"] for r in rows] == ["m", "m_keep", "m_zero", "m_zero-near"] * 2
        for s in range(2):
            mine = [r for r in rows if r["seed"] == str(s)]
            for r, a in zip(mine[1:], arms):   # each arm: its own checkpoint's numbers
                assert r["ckpt"] == f"ck/{s}/{a}.pt" and float(r["error"]) == pytest.approx(losses[r["ckpt"]][0], abs=0.006)
            # brute force: the first arm, in the order given, of the smallest loss
            keyed = sorted((float(losses[f"ck/{s}/{a}.pt"][1]), i, a) for i, a in enumerate(arms))
            best = keyed[0][2]
            ties += keyed[0][0] == keyed[1][0]
            assert mine[0]["ckpt"] == f"ck/{s}/{best}.pt" and mine[0]["error"] == mine[1 + arms.index(best)]["error"]
            assert f"| m | 2 | test | {s} | {best} |" in md
    assert ties > 0   # ties were exercised
    capsys.readouterr()


def test_one_arm_is_a_plain_run_and_bad_arms_are_refused(tmp_path, monkeypatch, capsys):
    from nesyseq.evaluations.qa_eval import parse_run
    from nesyseq.common.errors import UserError

    rows, md = _evaluate_arms(tmp_path, monkeypatch, ["model=m,task=2,seed=0,data=d,arms=zero,ckpt=ck/{arm}.pt"],
                              {"ck/zero.pt": (1.0, "0.1")})
    assert [(r["model"], r["ckpt"]) for r in rows] == [("m", "ck/zero.pt")] and "lowest validation loss" not in md
    for spec, words in (("arms=keep keep,ckpt=c/{arm}", "distinct"), ("arms=keep zero,ckpt=c.pt", "{arm} in ckpt"),
                        ("ckpt=c/{arm}.pt", "no arms="), ("arms= ,ckpt=c/{arm}", "distinct")):
        with pytest.raises(UserError, match=re.escape(words)):
            parse_run(f"model=m,task=2,seed=0,data=d,{spec}")
    with pytest.raises(UserError, match=r"ck/keep\.pt has no validation loss"):
        _evaluate_arms(tmp_path, monkeypatch, ["model=m,task=2,seed=0,data=d,arms=keep zero,ckpt=ck/{arm}.pt"],
                       {"ck/keep.pt": (1.0, ""), "ck/zero.pt": (2.0, "0.1")})
    capsys.readouterr()
