"""``nesyseq evaluate qa``'s seed chosen by validation loss (evaluations/qa_eval.py).

Reference: a brute-force pick (sort each group's rows by (valid loss, position)) written
independently of ``select_by_valid``."""
import random

from evaluations.qa_eval import markdown, select_by_valid, valid_loss


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
