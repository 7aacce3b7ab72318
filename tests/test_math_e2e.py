"""End to end through the stock CLIs: DeepMind generator -> prepare -> fairseq-train
(--user-dir, relative, from another working directory) -> --restore-file ->
fairseq-generate (via nesyseq evaluate math) -> tables checked against the
hypothesis files -> nesyseq analyze roles."""
import csv
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MODULES = "numbers__place_value,comparison__pair"

pytestmark = pytest.mark.slow


def run(cmd, cwd, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=900, **kw)
    assert p.returncode == 0, f"{cmd[0]} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout + p.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("math_e2e")
    data_root = root / "data"
    run([BIN / "nesyseq", "prepare", "math", "--out", data_root, "--modules", MODULES,
         "--per-module", 90, "--test-per-module", 12, "--seed", 3, "--workers", 2, "--no-progress"],
        cwd=root)
    data = data_root / "bin"
    elsewhere = root / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    rel_user_dir = os.path.relpath(REPO / "user_dir", elsewhere)  # relative, from another cwd
    save = root / "ckpt"
    common = [data, "--user-dir", rel_user_dir, "--task", "translation", "-s", "src", "-t", "tgt",
              "--arch", "tp_transformer_tiny", "--optimizer", "adam", "--lr", "1e-3",
              "--max-tokens", 2000, "--save-dir", save, "--no-epoch-checkpoints",
              "--num-workers", 0, "--cpu", "--log-format", "simple", "--log-interval", 10]
    run([BIN / "fairseq-train", *common, "--max-update", 24], cwd=elsewhere)
    # resume: fairseq-train loads checkpoint_last.pt with the default weights_only
    log = run([BIN / "fairseq-train", *common, "--max-update", 36,
               "--restore-file", save / "checkpoint_last.pt"], cwd=elsewhere)
    assert "Loaded checkpoint" in log and "num_updates 36" in log.replace("=", " ")
    return root, data, save / "checkpoint_best.pt"


def independent_score(generate_file, modules_file):
    """Re-score from fairseq-generate's text output, separately from evaluations/."""
    hyp, ref = {}, {}
    for line in open(generate_file, encoding="utf-8"):
        if line.startswith("H-"):
            i, _score, text = line.rstrip("\n").split("\t")
            hyp[int(i[2:])] = text
        elif line.startswith("T-"):
            i, text = line.rstrip("\n").split("\t")
            ref[int(i[2:])] = text
    modules = open(modules_file).read().split()
    per = defaultdict(lambda: [0, 0])
    for i, m in enumerate(modules):
        per[m][0] += 1
        per[m][1] += hyp[i].replace(" ", "") == ref[i].replace(" ", "")
    return dict(per), len(hyp)


@pytest.mark.parametrize("beam", [1, 3])
def test_evaluate_tables_agree_with_hypotheses(trained, beam):
    root, data, ckpt = trained
    out = root / f"eval_beam{beam}"
    stdout = run([BIN / "nesyseq", "evaluate", "math", "--checkpoint", ckpt, "--data", data,
                  "--out", out, "--beam", beam, "--cpu"], cwd=root)
    assert "| interpolate |" in stdout and "| extrapolate |" in stdout
    rows = list(csv.DictReader(open(out / "results.csv")))
    summary = json.loads((out / "summary.json").read_text())
    for subset, split in [("test", "interpolate"), ("test1", "extrapolate")]:
        per, n_hyp = independent_score(out / f"generate-{subset}.txt", data / f"{subset}.modules")
        n_lines = len((data.parent / "text" / f"{subset}.src").read_text().splitlines())
        assert n_hyp == n_lines == sum(n for n, _ in per.values())  # every example decoded once
        mine = {r["module"]: (int(r["n"]), int(r["correct"])) for r in rows if r["split"] == split}
        assert mine == {m: (n, c) for m, (n, c) in per.items()}
        accs = [c / n for n, c in per.values()]
        assert summary[split]["mean_accuracy"] == pytest.approx(sum(accs) / len(accs))
        assert summary[split]["modules_above_95"] == sum(a > 0.95 for a in accs)
        assert (out / f"accuracy_{split}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "results.md").read_text()
    for r in rows:
        assert f"| {r['split']} | {r['module']} | {r['n']} | {r['correct']} |" in table


def test_analyze_roles_draws_clusters(trained):
    root, data, ckpt = trained
    png = root / "roles.png"
    out = run([BIN / "nesyseq", "analyze", "roles", "--checkpoint", ckpt, "--data", data,
               "--module", "numbers__place_value", "--samples", 12, "--k", 5, "--out", png], cwd=root)
    assert str(png) in out and png.read_bytes()[:4] == b"\x89PNG"


def test_generate_with_user_dir_absolute(trained):
    root, data, ckpt = trained
    out = run([BIN / "fairseq-generate", data, "--user-dir", REPO / "user_dir", "--task", "translation",
               "-s", "src", "-t", "tgt", "--path", ckpt, "--gen-subset", "valid", "--beam", 2,
               "--batch-size", 16, "--required-batch-size-multiple", 1, "--cpu"], cwd="/")
    n_valid = len((data.parent / "text" / "valid.src").read_text().splitlines())
    assert sum(line.startswith("H-") for line in out.splitlines()) == n_valid


@pytest.mark.parametrize("config", ["experiment", "fairseq-default"])
def test_hydra_train_resolves_our_configs(trained, tmp_path, config):
    """The hydra search-path plugin finds configs/ from any directory: our
    experiment yaml by name, and our model yamls in fairseq's own config."""
    root, data, _ = trained
    args = ["model=tp_transformer_tiny", f"task.data={data}", f"common.user_dir={REPO / 'user_dir'}",
            f"checkpoint.save_dir={tmp_path / 'ckpt'}", "optimization.max_update=2",
            "common.cpu=true", "dataset.max_tokens=2000", "dataset.num_workers=0"]
    if config == "experiment":
        args = ["--config-name", "math_tp_transformer", *args]
    else:
        args += ["task=translation", "task.source_lang=src", "task.target_lang=tgt", "optimizer=adam"]
    log = run([BIN / "fairseq-hydra-train", *args], cwd=tmp_path)
    assert "TPTransformerModel" in log and "num_updates 2" in log
    assert (tmp_path / "ckpt" / "checkpoint_last.pt").is_file()
