"""The nesyseq command: every subcommand documents its options, and bad input is
one line naming the option or file, with exit status 2."""
import subprocess
import sys
from pathlib import Path

import pytest

from nesyseq.cli.main import COMMANDS, build_parser

NESYSEQ = Path(sys.executable).parent / "nesyseq"


def _sub_parsers(parser):
    for action in parser._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            yield from action.choices.items()


def test_every_option_has_help():
    top = build_parser()
    seen = 0
    for group, gp in _sub_parsers(top):
        leaves = list(_sub_parsers(gp)) or [(None, gp)]
        for _name, leaf in leaves:
            for action in leaf._actions:
                if action.option_strings and action.dest != "help":
                    assert action.help, f"{group} {_name}: {action.option_strings} has no help"
                    seen += 1
    assert seen >= 20
    assert {g for g, _ in COMMANDS} >= {"prepare", "evaluate", "analyze", "quickstart"}


@pytest.mark.parametrize("argv", [[], ["prepare", "math"], ["evaluate", "math"], ["analyze", "roles"],
                                  ["quickstart"]])
def test_help_runs(argv):
    p = subprocess.run([str(NESYSEQ), *argv, "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "usage: nesyseq" in p.stdout


def test_bad_input_is_one_line(tmp_path):
    data = tmp_path / "bin"
    data.mkdir()
    p = subprocess.run([str(NESYSEQ), "evaluate", "math", "--checkpoint", str(tmp_path / "missing.pt"),
                        "--data", str(data)], capture_output=True, text=True, timeout=120)
    err = [line for line in p.stderr.splitlines() if line.startswith("nesyseq: error:")]
    assert p.returncode == 2 and len(err) == 1 and "--checkpoint" in err[0] and "missing.pt" in err[0]
    assert "Traceback" not in p.stderr


def test_no_option_abbreviations():
    """A prefix of an option is not that option: with abbreviations on, `prepare qa --tas 2`
    was --tasks, and an option added later silently changes what an old prefix meant."""
    parser = build_parser(only=[("prepare", "qa")])
    _, extra = parser.parse_known_args(["prepare", "qa", "--generate", "--out", "x", "--tas", "2"])
    assert extra == ["--tas", "2"]                    # left over, so main() refuses it (exit 2)
    top = build_parser()
    assert top.allow_abbrev is False
    for group, gp in _sub_parsers(top):
        assert gp.allow_abbrev is False, group
        for name, leaf in _sub_parsers(gp):
            assert leaf.allow_abbrev is False, (group, name)


HEAVY = ("torch", "fairseq", "numpy", "matplotlib")


def _imports_after(argv):
    """Heavy modules imported by ``nesyseq ARGV`` (run in a fresh interpreter)."""
    code = ("import sys\nfrom nesyseq.cli.main import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "usage: nesyseq" in p.stdout
    return eval(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["prepare", "--help"], ["evaluate", "--help"],
                                  ["prepare", "math", "--help"]])
def test_help_imports_no_torch_or_fairseq(argv):
    assert _imports_after(argv) == []


def test_subcommand_help_imports_its_own_module():
    # a subcommand's --help imports its module (for its options) and no other
    p = subprocess.run([sys.executable, "-c", "import sys\nfrom nesyseq.cli.main import main\n"
                        "try:\n    main(['prepare', 'math', '--help'])\nexcept SystemExit:\n    pass\n"
                        "print('nesyseq.data_prep.math_cli' in sys.modules, "
                        "'nesyseq.evaluations.math_eval' in sys.modules)"],
                       capture_output=True, text=True, timeout=120)
    assert p.stdout.strip().splitlines()[-1] == "True False"
    assert "--per-module" in p.stdout
