"""Every `nesyseq evaluate` subcommand speaks one vocabulary: --checkpoint CKPT [CKPT ...],
--data DIR, --out DIR, --subset, --cpu; the older spellings still parse but are not advertised."""
import pytest

from nesyseq.cli.main import COMMANDS, build_parser

EVALUATE = sorted(name for group, name in COMMANDS if group == "evaluate")
OLD = {  # subcommand -> (old argv, the attribute and value it must give)
    "math": (["--checkpoint", "a.pt", "--data", "d", "--subsets", "test"], "subset", "test"),
    "lm": (["d", "--path", "a.pt", "--gen-subset", "valid"], "subset", "valid"),
    "entailment": (["--checkpoint", "n=a.pt", "--data", "d", "--splits", "test"], "subset", "test"),
    "wmt": (["--checkpoint", "a.pt", "--data", "d", "--gpu"], "gpu", True),
}


def _help(name):
    parser = build_parser(only=[("evaluate", name)])
    sub = parser._subparsers._group_actions[0].choices["evaluate"]._subparsers._group_actions[0].choices[name]
    return sub, sub.format_help()


@pytest.mark.parametrize("name", EVALUATE)
def test_evaluate_help_shows_the_one_vocabulary(name):
    _, text = _help(name)
    for flag in ("--checkpoint CKPT [CKPT ...]", "--data DIR", "--out DIR", "--subset NAME", "--cpu"):
        assert flag in text, (name, flag)
    for old in ("--path", "--gen-subset", "--subsets", "--splits", "--gpu "):
        assert old not in text, (name, old)


@pytest.mark.parametrize("name", sorted(OLD))
def test_old_spellings_still_parse(name):
    argv, attr, value = OLD[name]
    args = build_parser(only=[("evaluate", name)]).parse_args(["evaluate", name, *argv])
    assert getattr(args, attr) == value
    assert args.checkpoint == ["a.pt"] or args.checkpoint == ["n=a.pt"]


def test_several_checkpoints_in_one_flag_or_repeated():
    p = build_parser(only=[("evaluate", "qa")])
    a = p.parse_args(["evaluate", "qa", "--checkpoint", "a.pt", "b.pt", "--checkpoint", "c.pt", "--babi-file", "f"])
    assert a.checkpoint == ["a.pt", "b.pt", "c.pt"]


def _nesyseq(*argv, timeout=300):
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "nesyseq.cli.main", *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))


def test_version():
    r = _nesyseq("--version")
    assert r.returncode == 0 and r.stdout.startswith("nesyseq ") and r.stdout.split()[1][0].isdigit()


@pytest.mark.parametrize("name", ["math", "wmt", "lm", "entailment"])
def test_a_truncated_checkpoint_is_one_line_naming_the_file(name, tmp_path):
    import torch

    torch.save({"model": {"w": torch.zeros(64, 64)}, "cfg": {}}, tmp_path / "good.pt")
    data = (tmp_path / "good.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    (tmp_path / "d").mkdir()
    for f in ("dict.src.txt", "dict.txt", "prepare.json", "test.bin"):
        (tmp_path / "d" / f).write_text("{}" if f.endswith(".json") else "")
    r = _nesyseq("evaluate", name, "--checkpoint", tmp_path / "cut.pt", "--data", tmp_path / "d", "--out",
                 tmp_path / "o", "--cpu")
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cut.pt: not a readable checkpoint" in lines[0], r.stderr


def test_quickstart_refuses_an_unknown_arch_before_any_data_work(tmp_path):
    r = _nesyseq("quickstart", "--arch", "no_such_arch", "--out", tmp_path / "q")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        r.stderr.strip().splitlines()[-1]] and "--arch no_such_arch: no such architecture" in r.stderr
    assert not (tmp_path / "q" / "data").exists()
