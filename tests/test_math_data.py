"""Mathematics Dataset pipeline: generation, determinism, resume, preprocessing, bad input.

Small on purpose (2 modules, 3 examples per module and difficulty): the whole
file runs in well under a minute on 2 cores.  Expected values are computed
independently (raw files re-read line by line, sympy solving the linear
equations, fairseq's own loaders), never copied from a previous run.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nesyseq.common.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
MODULES = "algebra__linear_1d,arithmetic__add_or_sub"  # the latter has an extrapolate module
N, NTEST = 3, 2  # N per train difficulty; per_module=3 * N (DeepMind meaning)
SPACE = "\u2581"


def read_pairs(path):
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "", f"{path} must end with a newline"
    lines = lines[:-1]
    assert len(lines) % 2 == 0
    return list(zip(lines[0::2], lines[1::2]))


def raw_files(raw):
    return sorted(str(p.relative_to(raw)) for p in Path(raw).rglob("*.txt"))


def tokens_to_text(line):
    return "".join(" " if t == SPACE else t for t in line.split())


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Full pipeline, workers=1: OUT/raw, OUT/text, OUT/bin."""
    from nesyseq.data_prep.math_pipeline import prepare_math

    out = tmp_path_factory.mktemp("math_a")
    bin_dir = prepare_math(out, modules=MODULES, per_module=3 * N, test_per_module=NTEST, seed=7,
                           workers=1, valid_fraction=0.2, progress=False)
    assert bin_dir == out / "bin"
    return out


# --------------------------------------------------------------------------
# generator and module selection
# --------------------------------------------------------------------------


def test_compat_aliases_load_deepmind_generator():
    import importlib

    import numpy

    from nesyseq.data_prep.math_compat import load_generator

    modules = load_generator()
    dio = importlib.import_module("sympy.solvers.diophantine.diophantine")
    assert sys.modules["sympy.solvers.diophantine"].base_solution_linear is dio.base_solution_linear
    assert numpy.__dict__["object"] is object
    assert set(modules.all_) == {"algebra", "arithmetic", "calculus", "comparison", "measurement",
                                 "numbers", "polynomials", "probability"}


def test_module_names_and_extrapolate_families():
    from nesyseq.data_prep.math_generate import extrapolate_family, module_names, resolve_modules

    train, extra = module_names("interpolate"), module_names("extrapolate")
    assert len(train) == 56 and len(extra) == 15  # the paper's 56 modules
    assert module_names("train-easy") == train
    for e in extra:
        fam = extrapolate_family(e)
        assert fam in train, e
        assert e == fam or e.startswith(fam + "_")
        # longest such prefix: no other train module extends the family and prefixes e
        assert not [t for t in train if len(t) > len(fam) and (e == t or e.startswith(t + "_"))]
    assert extrapolate_family("arithmetic__mul_div_multiple_longer") == "arithmetic__mul_div_multiple"
    sel, ex = resolve_modules("arithmetic__add_*")
    assert sel == sorted(t for t in train if t.startswith("arithmetic__add_"))
    assert ex == ["arithmetic__add_or_sub_big", "arithmetic__add_sub_multiple_longer"]
    sel, ex = resolve_modules(MODULES)
    assert sel == MODULES.split(",") and ex == ["arithmetic__add_or_sub_big"]


@pytest.mark.parametrize("pattern", ["no_such_module", "algebra__linear_1d,arith*x", "arithmetic__div_big"])
def test_unknown_module_pattern_is_one_line_error(pattern):
    from nesyseq.data_prep.math_generate import resolve_modules

    with pytest.raises(UserError) as exc:
        resolve_modules(pattern)
    msg = str(exc.value)
    assert "\n" not in msg
    bad = pattern.split(",")[-1]
    assert repr(bad) in msg and "--list-modules" in msg
    assert "arithmetic__div" in msg or "algebra__linear_1d" in msg  # names some valid modules


def test_raw_layout_counts_and_parsing(prepared):
    import sympy

    from nesyseq.data_prep.math_preprocess import iter_module_file

    raw = prepared / "raw"
    expected = [f"{s}/{m}.txt" for s in ("train-easy", "train-medium", "train-hard", "interpolate")
                for m in MODULES.split(",")] + ["extrapolate/arithmetic__add_or_sub_big.txt"]
    assert raw_files(raw) == sorted(expected)
    for rel in expected:
        pairs = read_pairs(raw / rel)
        assert len(pairs) == (NTEST if rel.split("/")[0] in ("interpolate", "extrapolate") else N)
        parsed = list(iter_module_file(raw / rel))
        assert [(q, a) for q, a, _ in parsed] == pairs
        assert [line for _, _, line in parsed] == list(range(1, 2 * len(pairs), 2))
        for q, a in pairs:
            assert 0 < len(q) <= 160 and 0 < len(a) <= 30  # DeepMind's length limits
    # questions and answers really belong together: solve the linear equations with sympy
    for split in ("train-easy", "train-medium", "train-hard", "interpolate"):
        for q, a in read_pairs(raw / split / "algebra__linear_1d.txt"):
            assert q.startswith("Solve ") and " for " in q, q
            eq, var = q[len("Solve "):].rstrip(".").rsplit(" for ", 1)
            lhs, rhs = eq.split("=")
            sol = sympy.solve(sympy.sympify(lhs) - sympy.sympify(rhs), sympy.Symbol(var))
            assert sol == [sympy.Integer(a)], (q, a)


# --------------------------------------------------------------------------
# determinism and resume
# --------------------------------------------------------------------------


def test_deterministic_across_workers_and_module_selection(prepared, tmp_path):
    from nesyseq.data_prep.math_generate import generate_math

    raw_a = prepared / "raw"
    generate_math(tmp_path / "b", modules=MODULES, per_module=3 * N, test_per_module=NTEST, seed=7,
                  workers=2, progress=False)
    assert raw_files(tmp_path / "b") == raw_files(raw_a)
    for rel in raw_files(raw_a):
        assert (tmp_path / "b" / rel).read_bytes() == (raw_a / rel).read_bytes(), rel
    # a different selection: the shared module's files are byte-identical
    generate_math(tmp_path / "c", modules="arithmetic__add_or_sub", per_module=3 * N,
                  test_per_module=NTEST, seed=7, workers=1, progress=False)
    rels = raw_files(tmp_path / "c")
    assert len(rels) == 5 and all("arithmetic__add_or_sub" in r for r in rels)
    for rel in rels:
        assert (tmp_path / "c" / rel).read_bytes() == (raw_a / rel).read_bytes(), rel
    # another seed gives other problems
    generate_math(tmp_path / "d", modules="arithmetic__add_or_sub", per_module=3 * N,
                  test_per_module=NTEST, seed=8, workers=1, progress=False)
    assert any((tmp_path / "d" / r).read_bytes() != (raw_a / r).read_bytes() for r in rels)


def test_resume_skips_finished_and_redoes_interrupted(prepared, tmp_path):
    from nesyseq.data_prep.math_generate import generate_math

    raw = tmp_path / "raw"
    shutil.copytree(prepared / "raw", raw)
    original = {r: (raw / r).read_bytes() for r in raw_files(raw)}
    kw = dict(modules=MODULES, per_module=3 * N, test_per_module=NTEST, seed=7, workers=1, progress=False)
    mtimes = {r: os.stat(raw / r).st_mtime_ns for r in original}
    result = generate_math(raw, **kw)
    assert result["generated"] == [] and len(result["skipped"]) == len(original)
    assert {r: os.stat(raw / r).st_mtime_ns for r in original} == mtimes

    # 1. interrupted mid-write: partial tmp file, no new marker, stale final file
    victim = "train-medium/algebra__linear_1d.txt"
    (raw / (victim + ".tmp-99999")).write_text("Solve 1 = x for x.\n")
    os.remove(raw / (victim + ".done"))
    # 2. file changed after its marker was written (checksum mismatch)
    tampered = "interpolate/arithmetic__add_or_sub.txt"
    (raw / tampered).write_text("What is 1 + 1?\n3\n")
    # 3. marker written for other parameters (different count)
    marker = raw / "extrapolate/arithmetic__add_or_sub_big.txt.done"
    data = json.loads(marker.read_text())
    data["params"]["count"] += 1
    marker.write_text(json.dumps(data))

    result = generate_math(raw, **kw)
    assert result["generated"] == sorted(["train-medium/algebra__linear_1d", "interpolate/arithmetic__add_or_sub",
                                          "extrapolate/arithmetic__add_or_sub_big"])
    assert not list(raw.rglob("*.tmp-*"))
    for r, content in original.items():
        assert (raw / r).read_bytes() == content, r
        if r.replace(".txt", "") not in result["generated"]:
            assert os.stat(raw / r).st_mtime_ns == mtimes[r], r


def test_prepare_twice_does_not_rebuild(prepared):
    from nesyseq.data_prep.math_pipeline import prepare_math

    stats = prepared / "bin" / "prepare_stats.json"
    before = os.stat(stats).st_mtime_ns
    prepare_math(prepared, modules=MODULES, per_module=3 * N, test_per_module=NTEST, seed=7,
                 workers=1, valid_fraction=0.2, progress=False)
    assert os.stat(stats).st_mtime_ns == before


# --------------------------------------------------------------------------
# preprocessing and binarization
# --------------------------------------------------------------------------


def test_text_splits_modules_and_valid_disjoint(prepared):
    raw, text = prepared / "raw", prepared / "text"
    mods = MODULES.split(",")
    train_pairs = {(q, a) for s in ("train-easy", "train-medium", "train-hard") for m in mods
                   for q, a in read_pairs(raw / s / f"{m}.txt")}

    def subset(name):
        src = (text / f"{name}.src").read_text(encoding="utf-8").splitlines()
        tgt = (text / f"{name}.tgt").read_text(encoding="utf-8").splitlines()
        assert len(src) == len(tgt)
        for line in src + tgt:
            assert " " not in line.replace(" ", "")  # sanity
            assert all(len(t) == 1 for t in line.split(" ")), line  # one character per token
        return [(tokens_to_text(s), tokens_to_text(t)) for s, t in zip(src, tgt)]

    train, valid, test, test1 = (subset(n) for n in ("train", "valid", "test", "test1"))
    assert valid, "a validation split must be held out"
    tq = {q for q, _ in test} | {q for q, _ in test1}
    assert not ({q for q, _ in valid} & tq)
    assert not ({q for q, _ in valid} & {q for q, _ in train})
    stats = json.loads((prepared / "bin" / "prepare_stats.json").read_text())
    assert len(train) + len(valid) + stats["dropped_test_overlap"] == 3 * N * len(mods)
    assert set(train) | set(valid) <= train_pairs
    # test = interpolate, test1 = extrapolate, with aligned .modules files
    for name, split in (("test", "interpolate"), ("test1", "extrapolate")):
        pairs = subset(name)
        modules = (text / f"{name}.modules").read_text().splitlines()
        assert len(modules) == len(pairs)
        assert (prepared / "bin" / f"{name}.modules").read_text().splitlines() == modules
        for (q, a), m in zip(pairs, modules):
            assert (q, a) in read_pairs(raw / split / f"{m}.txt")
        assert sorted(set(modules)) == sorted(stats["raw"][split])
        assert stats["subsets"][name]["examples"] == len(pairs)
    assert sorted(set((text / "test.modules").read_text().split())) == mods
    assert (text / "test1.modules").read_text().split() == ["arithmetic__add_or_sub_big"] * NTEST
    assert " " in "".join(q for q, _ in test) and SPACE in (text / "test.src").read_text()


def test_binarized_roundtrip_with_fairseq_loaders(prepared):
    from fairseq.data import Dictionary, LanguagePairDataset, data_utils

    b, text = prepared / "bin", prepared / "text"
    assert (b / "dict.src.txt").read_bytes() == (b / "dict.tgt.txt").read_bytes()
    vocab = Dictionary.load(str(b / "dict.src.txt"))
    train_chars = set((text / "train.src").read_text().split()) | set((text / "train.tgt").read_text().split())
    assert {vocab[i] for i in range(vocab.nspecial, len(vocab))} - train_chars <= {
        f"madeupword{i:04d}" for i in range(8)}  # built from train only (+ fairseq's padding)
    for subset in ("train", "valid", "test", "test1"):
        src = data_utils.load_indexed_dataset(str(b / f"{subset}.src-tgt.src"), vocab)
        tgt = data_utils.load_indexed_dataset(str(b / f"{subset}.src-tgt.tgt"), vocab)
        lines_src = (text / f"{subset}.src").read_text(encoding="utf-8").splitlines()
        lines_tgt = (text / f"{subset}.tgt").read_text(encoding="utf-8").splitlines()
        assert len(src) == len(lines_src) == len(tgt) == len(lines_tgt) > 0
        pair = LanguagePairDataset(src, src.sizes, vocab, tgt, tgt.sizes, vocab)
        n_oov = 0
        for i in range(len(pair)):
            item = pair[i]
            assert item["source"][-1].item() == vocab.eos()
            for got, line in ((item["source"], lines_src[i]), (item["target"], lines_tgt[i])):
                toks = line.split()
                oov = [t not in train_chars for t in toks]
                n_oov += sum(oov)
                assert vocab.string(got) == " ".join("<unk>" if o else t for t, o in zip(toks, oov))
        if subset == "train":
            assert n_oov == 0
        elif subset in ("test", "test1"):  # counted in the stats (tiny data: e.g. unseen variable names)
            stats = json.loads((b / "prepare_stats.json").read_text())
            assert stats["unk"][subset]["chars"] == n_oov
        batch = pair.collater([pair[i] for i in range(min(4, len(pair)))])
        assert batch["net_input"]["src_tokens"].shape[0] == min(4, len(pair))


def test_translation_task_loads_all_subsets(prepared):
    from fairseq.tasks.translation import TranslationTask, load_langpair_dataset

    vocab = TranslationTask.load_dictionary(str(prepared / "bin" / "dict.src.txt"))
    for subset in ("train", "valid", "test", "test1"):
        ds = load_langpair_dataset(str(prepared / "bin"), subset, "src", vocab, "tgt", vocab, combine=False,
                                   dataset_impl=None, upsample_primary=1, left_pad_source=True,
                                   left_pad_target=False, max_source_positions=1024,
                                   max_target_positions=1024)
        assert len(ds) == len((prepared / "text" / f"{subset}.src").read_text().splitlines())


# --------------------------------------------------------------------------
# bad input (through --raw-dir), one line naming file and line
# --------------------------------------------------------------------------


@pytest.fixture()
def raw_copy(prepared, tmp_path):
    raw = tmp_path / "raw_in"
    shutil.copytree(prepared / "raw", raw, ignore=shutil.ignore_patterns("*.done"))
    return raw


def run_cli(argv):
    from nesyseq.cli.main import main

    return main(argv)


def assert_one_line_error(capsys, argv, *needles):
    rc = run_cli(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("nesyseq: error: ")
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def test_odd_number_of_lines(raw_copy, tmp_path, capsys):
    f = raw_copy / "train-hard" / "algebra__linear_1d.txt"
    n = len(f.read_text().splitlines())
    with open(f, "a") as fh:
        fh.write("Solve 2 = x for x.\n")
    assert_one_line_error(capsys, ["prepare", "math", "--out", str(tmp_path / "o"), "--raw-dir", str(raw_copy),
                                   "--no-progress"], f"{f}:{n + 1}:", "odd number of lines")
    assert not (tmp_path / "o" / "bin").exists()


def test_empty_module_file(raw_copy, tmp_path, capsys):
    f = raw_copy / "interpolate" / "arithmetic__add_or_sub.txt"
    f.write_text("")
    assert_one_line_error(capsys, ["prepare", "math", "--out", str(tmp_path / "o"), "--raw-dir", str(raw_copy),
                                   "--no-progress"], f"{f}:1:", "empty")


def test_blank_answer_line(raw_copy, tmp_path, capsys):
    f = raw_copy / "train-easy" / "arithmetic__add_or_sub.txt"
    lines = f.read_text().splitlines()
    lines[3] = ""
    f.write_text("\n".join(lines) + "\n")
    assert_one_line_error(capsys, ["prepare", "math", "--out", str(tmp_path / "o"), "--raw-dir", str(raw_copy),
                                   "--no-progress"], f"{f}:4:", "answer")


def test_tab_in_training_data(raw_copy, tmp_path, capsys):
    f = raw_copy / "train-easy" / "algebra__linear_1d.txt"
    lines = f.read_text().splitlines()
    lines[2] = lines[2].replace(" ", "\t", 1)
    f.write_text("\n".join(lines) + "\n")
    assert_one_line_error(capsys, ["prepare", "math", "--out", str(tmp_path / "o"), "--raw-dir", str(raw_copy),
                                   "--no-progress"], f"{f}:3:", "U+0009")


def test_unknown_pattern_in_raw_dir(raw_copy, tmp_path, capsys):
    assert_one_line_error(capsys, ["prepare", "math", "--out", str(tmp_path / "o"), "--raw-dir", str(raw_copy),
                                   "--modules", "calculus__*", "--no-progress"],
                          "'calculus__*'", "algebra__linear_1d")


def test_unknown_pattern_cli(tmp_path, capsys):
    assert_one_line_error(capsys, ["prepare", "math", "--out", str(tmp_path / "o"), "--modules", "algebra_linear"],
                          "'algebra_linear'", "--list-modules")
    assert not (tmp_path / "o").exists()


def test_oov_characters_at_test_time_map_to_unk(prepared, raw_copy, tmp_path, capsys):
    from fairseq.data import Dictionary, data_utils

    f = raw_copy / "interpolate" / "algebra__linear_1d.txt"  # first test module: its example 1 is test id 0
    lines = f.read_text().splitlines()
    lines[0] = "\u00e9" + lines[0]      # question of example 1 (line 1), column 1
    lines[3] = lines[3] + "\t"          # answer of example 2 (line 4)
    f.write_text("\n".join(lines) + "\n")
    out = tmp_path / "o"
    assert run_cli(["prepare", "math", "--out", str(out), "--raw-dir", str(raw_copy), "--no-progress",
                    "--valid-fraction", "0.2", "--seed", "7"]) == 0
    err = capsys.readouterr().err
    base = json.loads((prepared / "bin" / "prepare_stats.json").read_text())["unk"]["test"]
    unk = json.loads((out / "bin" / "prepare_stats.json").read_text())["unk"]["test"]
    # same training data and seed => same dictionary; exactly the two injected characters are new
    assert (out / "bin" / "dict.src.txt").read_bytes() == (prepared / "bin" / "dict.src.txt").read_bytes()
    assert unk["chars"] == base["chars"] + 2
    assert unk["first"].startswith(f"{f}:1: question character '\u00e9'"), unk["first"]
    warning = [line for line in err.splitlines() if line.startswith("nesyseq: warning: test:")]
    assert len(warning) == 1 and f"{f}:1:" in warning[0] and "<unk>" in warning[0], err
    vocab = Dictionary.load(str(out / "bin" / "dict.src.txt"))
    assert (out / "text" / "test.modules").read_text().splitlines()[0] == "algebra__linear_1d"
    src = data_utils.load_indexed_dataset(str(out / "bin" / "test.src-tgt.src"), vocab)
    tgt = data_utils.load_indexed_dataset(str(out / "bin" / "test.src-tgt.tgt"), vocab)
    assert src[0][0].item() == vocab.unk()
    assert tgt[1][-2].item() == vocab.unk() and tgt[1][-1].item() == vocab.eos()


# --------------------------------------------------------------------------
# CLI surface
# --------------------------------------------------------------------------


def test_cli_import_is_light_and_lists_modules():
    code = ("import sys, data_prep.math_cli; "
            "print(any(m.split('.')[0] in ('fairseq', 'mathematics_dataset', 'sympy', 'torch') "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    p = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "prepare", "math", "--list-modules"],
                       cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    from nesyseq.data_prep.math_generate import module_names

    for name in module_names("interpolate") + module_names("extrapolate"):
        assert name in p.stdout


def test_preprocess_only_rebuilds(prepared, tmp_path):
    out = tmp_path / "o"
    shutil.copytree(prepared / "raw", out / "raw", ignore=shutil.ignore_patterns("*.done"))
    assert run_cli(["prepare", "math", "--out", str(out), "--preprocess-only", "--modules", MODULES,
                    "--seed", "7", "--valid-fraction", "0.2", "--no-progress"]) == 0
    for name in ("train.src", "valid.tgt", "test.src", "test1.modules"):
        assert (out / "text" / name).read_bytes() == (prepared / "text" / name).read_bytes()
    assert not list((out / "raw").rglob("*.done"))  # nothing was generated


# --------------------------------------------------------------------------
# difficulty levels and split disjointness against independent references
# --------------------------------------------------------------------------


def test_each_split_is_generated_at_its_deepmind_level(prepared, tmp_path):
    """Every raw file equals what DeepMind's generate.py pieces produce for that split
    (train-easy/medium/hard at entropy levels 0/1/2 of 3, interpolate = modules.test(),
    extrapolate = modules.test_extra()), with the same per-job seed."""
    import os
    import subprocess
    import sys

    from nesyseq.data_prep.math_generate import hash_seed_for

    raw = prepared / "raw"
    jobs = []
    for rel in raw_files(raw):
        split, name = rel.split("/")
        jobs.append([split, name[:-4], len(read_pairs(raw / rel))])
    assert {j[0] for j in jobs} == {"train-easy", "train-medium", "train-hard", "interpolate",
                                    "extrapolate"}
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    env = dict(os.environ, PYTHONHASHSEED=hash_seed_for(7), PYTHONPATH=str(ROOT),
               OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, str(ROOT / "tests/reference/deepmind_regenerate.py"), "7",
                           str(tmp_path / "jobs.json")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    want = json.loads(proc.stdout)
    for split, module, _ in jobs:
        got = (raw / split / f"{module}.txt").read_text(encoding="utf-8")
        assert got == want[f"{split}/{module}"], f"{split}/{module} differs from DeepMind's generator"


def test_train_and_valid_are_disjoint_from_both_test_sets(prepared, raw_copy, tmp_path):
    """Copy every interpolate and extrapolate question into the training files: none may
    reach train or valid, and each copy is counted as dropped."""
    raw_pairs = {s: [p for m in sorted((raw_copy / s).glob("*.txt")) for p in read_pairs(m)]
                 for s in ("interpolate", "extrapolate")}
    injected = raw_pairs["interpolate"] + raw_pairs["extrapolate"]
    assert injected
    for module_file in sorted((raw_copy / "train-easy").glob("*.txt")):
        with open(module_file, "a", encoding="utf-8") as f:
            for q, a in injected:
                f.write(f"{q}\n{a}\n")
    out = tmp_path / "o"
    assert run_cli(["prepare", "math", "--out", str(out), "--raw-dir", str(raw_copy),
                    "--no-progress", "--valid-fraction", "0.5", "--seed", "7"]) == 0
    text = out / "text"

    def questions(name):
        return {tokens_to_text(s) for s in (text / f"{name}.src").read_text(encoding="utf-8").splitlines()}

    test_q = questions("test") | questions("test1")
    assert test_q == {q for q, _ in injected}
    assert not (questions("train") & test_q)
    assert not (questions("valid") & test_q)
    base = json.loads((prepared / "bin" / "prepare_stats.json").read_text())["dropped_test_overlap"]
    stats = json.loads((out / "bin" / "prepare_stats.json").read_text())
    n_train_files = len(list((raw_copy / "train-easy").glob("*.txt")))
    assert stats["dropped_test_overlap"] == base + n_train_files * len(injected)
