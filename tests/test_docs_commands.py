"""Every command a reader can paste from README.md, docs/ and examples/ parses with the real parser.

A fenced block is a command block unless its language is one of TEXT_LANGS (```text for data-flow
sketches, ```yaml, ```python, ...) or the line right above its opening fence is ILLUSTRATIVE.  In a
command block, every `fairseq-train`, `fairseq-generate`, `fairseq-hydra-train` and `nesyseq`
command must parse:

- fairseq-train / fairseq-generate: fairseq's own options parser, after importing our
  `--user-dir` (as the CLI does), with the task's and the model's options added; fairseq-train must
  name a registered architecture and say when it stops (`--max-update` or `--max-epoch` > 0);
- fairseq-hydra-train: `--cfg job` composes the config with its overrides; the composed model is
  registered and `optimization.max_update` or `max_epoch` is set;
- nesyseq: `nesyseq.cli.main`'s argparse; `nesyseq launch NAME` needs configs/experiments/NAME.yaml,
  and that config must give its training stage a `--max-update`/`--max-epoch` (max_update /
  max_epoch).

Shell is read the way bash would for these lines: `\\` continuations join, comments drop, `VAR=...`
assignments earlier in the block are expanded, `&&`, `;` and `|` split commands, leading
`VAR=value` words and `nice`/`time` prefixes are skipped.  Unexpanded brace lists such as
`--seed {1,2,3}` are an error: bash would turn them into three words.

Every guide also has a `## Try it` section with a command block (small data, CPU); the QA guide's
one runs end to end here (slow), the others are the commands of an end-to-end test named in
TRY_IT_TESTS.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ILLUSTRATIVE = "<!-- illustrative -->"
TEXT_LANGS = {"text", "yaml", "yml", "python", "py", "json", "csv", "toml", "ini", "diff", "cff", "markdown", "md"}
TOOLS = ("fairseq-train", "fairseq-generate", "fairseq-hydra-train", "nesyseq")
PREFIXES = {"nice", "time", "env"}
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")
GUIDES = ["install", "math", "wmt", "qa", "folnet", "tpru", "slurm", "gpu"]
# a guide's "Try it" block -> the end-to-end test that runs the same commands (on its own data)
TRY_IT_TESTS = {
    "install": "tests/test_math_e2e.py::trained",
    "math": "tests/test_math_e2e.py::trained",
    "wmt": "tests/test_wmt.py::test_prepare_train_evaluate_end_to_end",
    "folnet": "tests/test_folnet_cli.py::test_folnet_masked_lm",
    "tpru": "tests/test_tpru_classifier.py::test_end_to_end_fairseq_train_and_evaluate",
    "slurm": "tests/test_slurm.py::test_chain_array_status_collect_and_skip",
    "gpu": "tests/test_bf16_option.py::test_fairseq_train_bf16_on_cpu",
}
# commands the docs already use that land with another change (`nesyseq fetch`, the Table-2
# experiment): skipped while absent, parsed like every other command once they exist
PENDING_COMMANDS = {"fetch"}
PENDING_EXPERIMENTS = {"qa_table2"}


def doc_files():
    files = [ROOT / "README.md"]
    for folder in ("docs", "examples"):
        files += sorted((ROOT / folder).rglob("*.md"))
    return [f for f in files if ".venv" not in f.parts]


def fenced_blocks(text: str):
    """(first line number, language, illustrative, body) of each fenced block of a markdown text."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        above = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence[:3]):
            body.append(lines[i])
            i += 1
        i += 1
        yield start + 1, lang, above == ILLUSTRATIVE, "\n".join(body)


def commands_of(body: str):
    """The commands of a shell block, variables expanded: lists of words."""
    text = re.sub(r"\\\n", " ", body)
    env = {}
    for line in text.splitlines():
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            words = list(lexer)
        except ValueError as e:  # an unclosed quote: bash would not run the block either
            yield ["nesyseq", f"<unreadable shell: {e}: {line[:120]!r}>"]
            continue
        cmd = []
        for w in words + [";"]:
            if w and set(w) <= set(";&|"):
                if cmd:
                    yield from _one(cmd, env)
                cmd = []
            else:
                cmd.append(w)


def _expand(word: str, env: dict) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), f"/tmp/{m.group(1).lower()}"), word)


def _one(words, env):
    words = [_expand(w, env) for w in words]
    kept, skip = [], False
    for w in words:  # redirections: `> log`, `2>&1` (split at &), `>>log`
        if skip:
            skip = False
        elif re.fullmatch(r"\d*[<>]{1,2}", w):
            skip = True
        elif not re.match(r"^\d*[<>]", w):
            kept.append(w)
    words = kept
    if len(words) >= 4 and words[0] == "for" and words[2] == "in":  # a loop: its first value
        env[words[1]] = words[3]
        return
    while words:
        if words[0] in ("do", "then", "else"):
            words = words[1:]
        elif re.match(r"^\w+=", words[0]):
            if len(words) == 1:
                name, value = words[0].split("=", 1)
                env[name] = value
            words = words[1:]
        elif words[0] == "nice":
            words = words[3:] if words[1:2] == ["-n"] else words[1:]
        elif words[0] in PREFIXES:
            words = words[1:]
        else:
            break
    if words and words[0] == "export":
        for w in words[1:]:
            if "=" in w:
                name, value = w.split("=", 1)
                env[name] = value
        return
    if words:
        yield words


def tool_commands():
    """(id, file, line, words) of every tool command in a command block of the docs."""
    out = []
    for path in doc_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, lang, illustrative, body in fenced_blocks(path.read_text(encoding="utf-8")):
            if illustrative or lang in TEXT_LANGS:
                continue
            for words in commands_of(body):
                if Path(words[0]).name in TOOLS:
                    out.append((f"{rel}:{line}:{Path(words[0]).name}", rel, line, words))
    return out


COMMANDS = tool_commands()


def _user_dir():
    from fairseq import utils
    utils.import_user_module(argparse.Namespace(user_dir=str(ROOT / "user_dir")))


def _with_our_user_dir(args):
    """--user-dir PATH -> this checkout's user_dir (docs write it relative or as /abs/nesyseq/user_dir)."""
    out = list(args)
    for i, a in enumerate(out):
        if a == "--user-dir" and i + 1 < len(out):
            assert out[i + 1].rstrip("/").endswith("user_dir"), f"--user-dir {out[i + 1]} is not nesyseq's user_dir"
            out[i + 1] = str(ROOT / "user_dir")
        elif a.startswith("--user-dir="):
            out[i] = "--user-dir=" + str(ROOT / "user_dir")
    return out


def _parse_fairseq(words):
    from fairseq import options
    from fairseq.models import ARCH_MODEL_REGISTRY
    _user_dir()
    tool, args = Path(words[0]).name, _with_our_user_dir(words[1:])
    assert "--user-dir" in args or any(a.startswith("--user-dir=") for a in args), "no --user-dir"
    for a in args:
        assert not re.search(r"\{[^}]*,[^}]*\}", a), f"{a}: bash expands this brace list into several words"
        assert a not in ("...", "…") and not a.startswith("["), f"{a}: a placeholder, not an argument"
    parser = options.get_training_parser() if tool == "fairseq-train" else options.get_generation_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parsed = options.parse_args_and_arch(parser, input_args=args)
    except SystemExit:
        raise AssertionError(f"{tool} does not parse: {err.getvalue().strip()[-600:]}")
    except RuntimeError:  # fairseq's parse_args_and_arch on a command without a known --arch
        raise AssertionError(f"{tool}: no registered --arch")
    if tool == "fairseq-train":
        assert parsed.arch in ARCH_MODEL_REGISTRY, f"--arch {parsed.arch} is not a registered architecture"
        assert (parsed.max_update or 0) > 0 or (parsed.max_epoch or 0) > 0, \
            "fairseq-train without --max-update or --max-epoch never stops"


def _parse_hydra(words):
    from fairseq.models import MODEL_REGISTRY
    from nesyseq.common.fairseq_cli import fairseq_bin, small_cpu_env
    _user_dir()
    args = [(a.split("=", 1)[0] + "=" + str(ROOT / "user_dir")) if a.lstrip("+").startswith("common.user_dir=")
            else a for a in words[1:]]
    env = small_cpu_env(True)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([fairseq_bin("fairseq-hydra-train"), *args, "--cfg", "job"], cwd=ROOT / "tests",
                         env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert res.returncode == 0, f"fairseq-hydra-train does not compose:\n{res.stdout[-1500:]}"
    names = re.findall(r"^model:\n(?:  .*\n)*?  _name: (\S+)", res.stdout, re.M)
    assert names and names[0] in MODEL_REGISTRY, f"composed model {names} is not registered"
    stops = re.findall(r"^  max_(?:update|epoch): (\d+)", res.stdout, re.M)
    assert any(int(s) > 0 for s in stops), "the composed config sets neither max_update nor max_epoch"


def _parse_nesyseq(words):
    sys.path.insert(0, str(ROOT))
    from nesyseq.cli import main as cli
    argv = words[1:]
    chosen = cli.selected_command(argv)
    if chosen is None and argv and argv[0] in PENDING_COMMANDS:
        pytest.skip(f"nesyseq {argv[0]} is not in this checkout yet")
    assert chosen is not None, f"nesyseq {' '.join(argv[:2])}: no such subcommand"
    parser = cli.build_parser(only=[chosen])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args, extra = parser.parse_known_args(argv)
    except SystemExit:
        raise AssertionError(f"nesyseq does not parse: {err.getvalue().strip()[-600:]}")
    if extra:
        assert hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra), \
            f"nesyseq: unrecognized arguments: {' '.join(extra)}"
    if chosen == ("launch", None):
        name = args.experiment
        config = ROOT / "configs" / "experiments" / f"{name}.yaml"
        if not config.is_file() and name in PENDING_EXPERIMENTS:
            pytest.skip(f"configs/experiments/{name}.yaml is not in this checkout yet")
        assert config.is_file(), f"nesyseq launch {name}: no configs/experiments/{name}.yaml"
        text = config.read_text(encoding="utf-8")
        if re.search(r"fairseq-train|fairseq_cli\.train|--arch", text):
            assert re.search(r"--max-(update|epoch)|max_(update|epoch):", text), \
                f"configs/experiments/{name}.yaml trains without max_update or max_epoch"


@pytest.mark.parametrize("where,rel,line,words",
                         [pytest.param(*c, marks=[pytest.mark.slow] if c[0].endswith("hydra-train") else [],
                                       id=c[0]) for c in COMMANDS])
def test_command_parses(where, rel, line, words):
    tool = Path(words[0]).name
    try:
        if tool in ("fairseq-train", "fairseq-generate"):
            _parse_fairseq(words)
        elif tool == "fairseq-hydra-train":
            _parse_hydra(words)
        else:
            _parse_nesyseq(words)
    except AssertionError as e:
        raise AssertionError(f"{where}: {' '.join(words)[:300]}\n{e}") from None


def test_the_docs_have_commands_of_every_tool():
    tools = {Path(c[3][0]).name for c in COMMANDS}
    assert set(TOOLS) <= tools, f"no command block uses {set(TOOLS) - tools}"
    assert any("--task" in c[3] and "babi_qa" in c[3] for c in COMMANDS
               if c[3][0] == "fairseq-train" and c[1].startswith("docs/")), \
        "no guide has a fairseq-train --task babi_qa line"


def test_a_bad_command_is_caught():
    """The checks above fail on the pasted-command bugs they exist for."""
    bad = {
        "no stop": "fairseq-train d --user-dir user_dir --task translation --arch tp_transformer_math",
        "brace list": "fairseq-train d --user-dir user_dir --task entailment_pairs --arch tpru_classifier "
                      "--cell tpru --max-update 10 --save-dir ck/{tpru,lstm}",
        "placeholder": "fairseq-train d --user-dir user_dir --task entailment_pairs --arch tpru_classifier "
                       "[--num-roles N] --max-update 10",
        "unknown arch": "fairseq-train d --user-dir user_dir --task babi_qa --arch stpr_huge --max-update 10",
        "no arch": "fairseq-train d --user-dir user_dir --task babi_qa --max-update 10",
    }
    for what, line in bad.items():
        (words,) = list(commands_of(line))
        with pytest.raises(AssertionError):
            _parse_fairseq(words)
    (words,) = list(commands_of("nesyseq evaluate qa --no-such-option 1"))
    with pytest.raises(AssertionError):
        _parse_nesyseq(words)
    (words,) = list(commands_of("nesyseq launch no_such_experiment"))
    with pytest.raises(AssertionError):
        _parse_nesyseq(words)


def test_block_reading():
    body = "B=data/x   # the folder\nOMP_NUM_THREADS=1 nice -n 10 fairseq-train $B \\\n  --max-update 5 && nesyseq evaluate qa | tee log"
    cmds = list(commands_of(body))
    assert cmds == [["fairseq-train", "data/x", "--max-update", "5"], ["nesyseq", "evaluate", "qa"], ["tee", "log"]]
    loop = "for s in 1 2 3; do\n  fairseq-train d --seed $s\ndone"
    assert list(commands_of(loop)) == [["fairseq-train", "d", "--seed", "1"], ["done"]]
    text = "x\n<!-- illustrative -->\n```bash\nfairseq-train d\n```\n```text\nnesyseq a\n```\n"
    assert [(lang, ill) for _, lang, ill, _ in fenced_blocks(text)] == [("bash", True), ("text", False)]


def test_model_flags_page_is_current():
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "model_flags_doc.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-800:]


@pytest.mark.parametrize("guide", GUIDES)
def test_every_guide_has_a_try_it_block(guide):
    text = (ROOT / "docs" / f"{guide}.md").read_text(encoding="utf-8")
    m = re.search(r"^## Try it\b.*?\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"docs/{guide}.md has no '## Try it' section"
    blocks = [b for _, lang, ill, b in fenced_blocks(m.group(1)) if lang not in TEXT_LANGS and not ill]
    assert blocks and any(list(commands_of(b)) for b in blocks), f"docs/{guide}.md: 'Try it' has no command block"
    if guide in TRY_IT_TESTS:
        test_file, name = TRY_IT_TESTS[guide].split("::")
        assert (ROOT / test_file).is_file() and re.search(rf"^def {name}\(", (ROOT / test_file).read_text(), re.M), \
            f"{TRY_IT_TESTS[guide]} (the test behind docs/{guide}.md's try-it block) is gone"


def test_guides_are_short_and_clean():
    for path in sorted((ROOT / "docs").rglob("*.md")):
        rel = path.relative_to(ROOT).as_posix()
        lines = path.read_text(encoding="utf-8").splitlines()
        if not rel.startswith("docs/gpu_runs/") and rel != "docs/flags.md":
            assert len(lines) <= 300, f"{rel}: {len(lines)} lines (a guide is at most 300)"
    assert not [p for p in (ROOT / "docs").rglob("*") if p.suffix in (".py", ".sh")], "scripts under docs/"
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        outside = re.sub(r"^\s*(```+|~~~+).*?^\s*\1\s*$", "", text, flags=re.S | re.M)
        indented = re.search(r"^(?: {4}|\t)(?:fairseq-train|fairseq-generate|fairseq-hydra-train|nesyseq) .*", outside, re.M)
        assert not indented, f"{rel}: an indented command block ({indented.group(0)[:80]!r}); fence it so it is checked"
        for bad in ("/work/", "shared/papers", "fetch tool"):
            assert bad not in text, f"{rel} mentions {bad!r}"
        for m in re.finditer(r"(?i)\bsessions?\b", text):
            around = text[max(0, m.start() - 80): m.end() + 80]
            assert re.search(r"(?i)slurm|salloc|srun|sbatch|job", around), \
                f"{rel}: 'session' outside SLURM's meaning: ...{around}..."


OUTPUT_FLAGS = ("--out", "--save-dir", "--destdir", "--run-dir", "-d")


def test_try_it_outputs_are_ignored_by_git():
    """`git status` stays clean after the Try-it blocks of the README and the guides and after
    `make quickstart` (its --out default): every folder they write is in .gitignore."""
    from nesyseq.cli import quickstart

    outputs = {quickstart_default(quickstart)}
    for rel in ["README.md"] + [f"docs/{g}.md" for g in GUIDES]:
        text = (ROOT / rel).read_text(encoding="utf-8")
        section = re.search(r"^## Try it\b.*?\n(.*?)(?=^## |\Z)", text, re.S | re.M).group(1)
        for _, lang, ill, body in fenced_blocks(section):
            if lang in TEXT_LANGS or ill:
                continue
            words = shlex.split(re.sub(r"\\\n", " ", body), comments=True)
            for flag, value in zip(words, words[1:]):
                if flag in OUTPUT_FLAGS:
                    outputs.add(re.sub(r"^\$(PWD|\{PWD\})/", "", value).split("/")[0])
    assert {"qa-try", "quickstart", "math-try", "runs"} <= outputs
    for out in sorted(outputs):
        r = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", f"{out}/x"], capture_output=True)
        assert r.returncode == 0, f"{out}/ (a Try-it output) is not in .gitignore"


def quickstart_default(module) -> str:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.get_default("out")


@pytest.mark.slow
def test_qa_try_it_runs(tmp_path):
    """docs/qa.md's try-it block, run as written (bAbI-style data, stpr, CPU, a few dozen updates),
    and quiet: none of the known-harmless third-party notices (nesyseq/common/quiet.py).  The
    block's commands run under the suite's fork server, which has imported fairseq already, so
    what importing it prints is checked on a plain fairseq-train with the guide's --user-dir."""
    text = (ROOT / "docs" / "qa.md").read_text(encoding="utf-8")
    section = re.search(r"^## Try it\b.*?\n(.*?)(?=^## |\Z)", text, re.S | re.M).group(1)
    body = next(b for _, lang, ill, b in fenced_blocks(section) if lang not in TEXT_LANGS and not ill)
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    script = f"set -euo pipefail\ncd {shlex.quote(str(tmp_path))}\nln -s {shlex.quote(str(ROOT / 'user_dir'))} user_dir\n{body}\n"
    res = subprocess.run(["bash", "-c", script], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert res.returncode == 0, res.stdout[-3000:]
    # --task babi_qa is a choice only once the user dir is imported (fairseq exits 2 on an unknown task)
    plain = subprocess.run(["fairseq-train", "--user-dir", "user_dir", "--task", "babi_qa", "--help"], cwd=tmp_path,
                           text=True, env=dict(env, NESYSEQ_TEST_FORKSERVER="0"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    assert plain.returncode == 0, plain.stdout[-3000:]
    for out, what in ((res.stdout, "the try-it output"), (plain.stdout, "a plain fairseq-train's import")):
        for noise in ("UserWarning", "FutureWarning", "Please install tensorboardX", "pin_memory"):
            assert noise not in out, f"{noise!r} in {what}:\n{out[-3000:]}"
    reports = list(tmp_path.rglob("qa_results.csv")) + list(tmp_path.rglob("qa_external.json"))
    assert reports, f"the try-it block wrote no evaluation report:\n{res.stdout[-1500:]}"
