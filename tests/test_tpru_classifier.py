"""tpru_classifier + entailment_pairs task: Siamese encoder, renaming, cells, and a tiny fairseq-train run."""
import subprocess

import pytest
import torch

from nesyseq import plugins  # noqa: F401
from nesyseq.common.fairseq_cli import USER_DIR, fairseq_bin, small_cpu_env
from nesyseq.cli.main import main as nesyseq_main
from nesyseq.plugins.layers.tpru import recurrent_param_count
from nesyseq.plugins.models.tpru_classifier import TPRUClassifier, TPRUClassifierConfig
from nesyseq.plugins.tasks.entailment import EntailmentConfig, EntailmentPairsTask, VARIABLES


def make_task(data=""):
    return EntailmentPairsTask.setup_task(EntailmentConfig(data=data, seed=0))


@pytest.mark.parametrize("cell,want", [("tpru", 40960), ("lstm", 65536), ("gru", 49152)])
def test_model_shapes_params_and_siamese(cell, want):
    torch.manual_seed(0)
    task = make_task()
    model = TPRUClassifier(TPRUClassifierConfig(cell=cell, num_roles=8), task.dictionary).eval()
    assert recurrent_param_count(model) == want
    a = torch.stack([task.encode("(a&b)"), task.encode("((a|b)>c)")[:5]])
    b = torch.stack([task.encode("a"), task.encode("b")])
    out = model(a, b)
    assert out.shape == (2,)
    # Siamese: the same formula gives the same code on the A and B side; padding does not matter
    pad = task.dictionary.pad()
    u1 = model.encode(task.encode("~((a&b))")[None])
    u2 = model.encode(torch.cat([task.encode("~((a&b))"), torch.full((4,), pad)])[None])
    torch.testing.assert_close(u1, u2)
    # features are [u; v; |u-v|; u*v]: swapping A and B permutes only u and v
    feats = lambda x, y: torch.cat([x, y, (x - y).abs(), x * y], -1)
    ua, ub = model.encode(a), model.encode(torch.nn.functional.pad(b, (0, a.size(1) - b.size(1)), value=pad))
    torch.testing.assert_close(out, model.mlp(feats(ua, ub)).squeeze(-1))


def test_renaming_is_a_consistent_permutation():
    task = make_task()
    a = torch.stack([task.encode("((a&b)>~(c))")])
    b = torch.stack([task.encode("((c|a)&b)")])
    perm = torch.tensor([2, 0, 1] + list(range(3, 26)))
    ra, rb = task.rename(a, perm), task.rename(b, perm)
    dec = lambda t: "".join(task.dictionary[i] for i in t[0])
    assert dec(ra) == "((c&a)>~(b))" and dec(rb) == "((b|c)&a)"

    seen = {}

    class Spy:
        def __call__(self, model, sample):
            seen["s"] = sample
            return torch.zeros((), requires_grad=True), 1, {}

    class Opt:
        def backward(self, loss):
            pass

    class Model(torch.nn.Linear):
        def set_num_updates(self, n):
            pass

    model = Model(1, 1)
    sample = {"net_input": {"a_tokens": a, "b_tokens": b}, "target": torch.ones(1)}
    task.train_step(sample, model, Spy(), Opt(), 0)
    na, nb = seen["s"]["net_input"]["a_tokens"], seen["s"]["net_input"]["b_tokens"]
    # structure kept, variables renamed consistently across A and B
    assert [c for c in dec(na) if c not in VARIABLES] == [c for c in "((a&b)>~(c))" if c not in VARIABLES]
    pairs = set(zip(dec(a) + dec(b), dec(na) + dec(nb)))        # (old, new) per position, A and B together
    assert len({o for o, _ in pairs}) == len(pairs) == len({n for _, n in pairs})   # one bijection for both
    assert (a == sample["net_input"]["a_tokens"]).all()          # caller's batch untouched


@pytest.mark.slow
def test_end_to_end_fairseq_train_and_evaluate(tmp_path):
    data, ck, ev = tmp_path / "data", tmp_path / "ck", tmp_path / "eval"
    assert nesyseq_main(["prepare", "entailment", "--generate", "--out", str(data), "--train-size", "256",
                         "--valid-size", "64", "--test-size", "32"]) == 0
    assert (data / "heuristics.md").exists()
    cmd = [fairseq_bin("fairseq-train"), "--user-dir", str(USER_DIR), str(data), "--task", "entailment_pairs",
           "--arch", "tpru_classifier", "--cell", "tpru", "--num-roles", "4", "--hidden-dim", "16",
           "--embed-dim", "16", "--criterion", "entailment_bce", "--optimizer", "amsgrad", "--lr", "1e-3",
           "--batch-size", "64", "--clip-norm", "1.0", "--max-update", "8", "--valid-subset", "validate",
           "--save-interval-updates", "3", "--validate-interval-updates", "3",
           "--best-checkpoint-metric", "accuracy", "--maximize-best-checkpoint-metric", "--save-dir", str(ck),
           "--no-progress-bar", "--cpu", "--seed", "1"]
    env = small_cpu_env()
    env["PYTHONPATH"] = str(USER_DIR.parent)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "recurrent params (slides' count)=" in res.stdout + res.stderr
    assert "best_accuracy" in res.stdout + res.stderr
    assert nesyseq_main(["evaluate", "entailment", "--data", str(data), "--out", str(ev),
                         "--checkpoint", f"tpru4={ck / 'checkpoint_best.pt'}", "--curve", f"tpru4={ck}"]) == 0
    table = (ev / "accuracy.md").read_text()
    assert "tpru4" in table and "test_massive" in table
    assert (ev / "accuracy.csv").exists() and (ev / "accuracy_vs_roles.png").stat().st_size > 0
    # 256 pairs = 4 updates an epoch; fairseq names only the off-epoch-end saves checkpoint_E_U.pt (3, 6)
    curve = (ev / "curves.csv").read_text().splitlines()
    assert curve[0] == "name,updates,validate_accuracy" and [r.split(",")[:2] for r in curve[1:]] == [
        ["tpru4", "3"], ["tpru4", "6"]]
    assert (ev / "curves.png").stat().st_size > 0
    # the re-scored curve agrees with fairseq-train's own validation at those updates
    import re
    logged = {int(u): float(a) for a, u in re.findall(
        r"valid on 'validate' subset \|.*?\| accuracy ([\d.]+) \|.*?\| num_updates (\d+)", res.stdout + res.stderr)}
    for row in curve[1:]:
        _, u, acc = row.split(",")
        assert abs(float(acc) - logged[int(u)]) < 0.06, (row, logged)


def test_interval_checkpoints_sorted_by_updates(tmp_path):
    from nesyseq.evaluations.entailment_eval import interval_checkpoints

    for name in ["checkpoint_1_100.pt", "checkpoint_3_1000.pt", "checkpoint_2_200.pt", "checkpoint_best.pt",
                 "checkpoint_last.pt", "checkpoint2.pt", "checkpoint_1_100.pt.tmp"]:
        (tmp_path / name).write_bytes(b"")
    got = [(u, p.rsplit("/", 1)[1]) for u, p in interval_checkpoints(str(tmp_path))]
    assert got == [(100, "checkpoint_1_100.pt"), (200, "checkpoint_2_200.pt"), (1000, "checkpoint_3_1000.pt")]
