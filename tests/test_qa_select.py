"""``nesyseq evaluate qa``'s seed chosen by validation loss (evaluations/qa_eval.py).

Reference: a brute-force pick (sort each group's rows by (valid loss, position)) written
independently of ``select_by_valid``."""
import random

from evaluations.qa_eval import markdown, select_by_valid


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
    return {k: v[1]["seed"] for k, v in out.items()}


def test_select_by_valid_is_the_brute_force_pick():
    rng = random.Random(0)
    for _ in range(50):
        rows = _rows(rng)
        got = {(r["model"], r["task"]): r["seed"] for r in select_by_valid(rows)}
        assert got == _brute(rows)
        for r in select_by_valid(rows):
            assert r["seeds"] == "4"


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
    picked = select_by_valid(rows)
    assert [(r["task"], r["seed"]) for r in picked] == [("5", "1")]
    md = markdown(rows, "bAbI-style")
    assert "| m | 5 | 1 | 0.200 | 7.25 | 2 |" in md
    assert "lowest validation loss" not in markdown(rows[:1], "bAbI-style")
