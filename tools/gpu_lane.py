#!/usr/bin/env python3
"""The GPU lane: ``make gpu-wheels`` (with network) and ``make test-gpu`` (on the GPU machine).

    python3 tools/gpu_lane.py wheels [--dest .whl]
        On any machine with network: download, for CPython 3.12 on manylinux x86_64, the
        wheels of every pinned package (constraints.txt) except torch, triton, torchaudio
        and the CUDA libraries, which the GPU machine brings.  Pure-Python packages that
        publish only a source archive are built into a py3-none-any wheel here.

    python3 tools/gpu_lane.py run [--wheels .whl] [--site DIR] [--steps ...] [--dry-run]
        On the GPU machine (no network; torch and triton already installed, e.g.
        /opt/torch/.venv/bin/python): install from --wheels the packages this interpreter
        lacks (``pip install --no-index --no-deps --target SITE``), then run every step:
          tests     the CUDA tests (tests/test_trans_cuda.py) and the kernel launch/layout tests
          folnet_lean  benchmarks/bench_folnet_lean.py: FOLNet's lean path, a bf16 and an fp16
                    training step against fp32, lean vs plain step time and peak memory
          smoke     a few fairseq-train updates on the GPU per model family: tp_transformer,
                    folnet (masked LM, Triton trans), folnet_transformer, memnet and stpr (QA),
                    tpru
          bench     benchmarks/bench_trans.py (Triton trans kernels vs eager), a small sweep;
                    benchmarks/bench_qa_split.py (the QA models' updates/s with the vectorised
                    split_story against the row-by-row one)
          precision tests/test_precision_cuda.py: 200 updates per family in every fairseq precision
        and write a dated summary, docs/gpu_runs/<UTC date>_<gpu>.md (GPU, versions, pass
        counts, the smoke runs' figures, the benchmarks' tables), atomically.  ``--dry-run`` prints the commands and
        runs nothing.

This file uses the standard library only: it runs before anything is installed.
"""
import argparse
import datetime as _dt
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from nesyseq.common.atomic import atomic_write_text as _atomic_write_text  # noqa: E402  (standard library only)

# What the GPU machine brings (and what must match its CUDA build): never downloaded.
PROVIDED = {"torch", "triton", "torchaudio"}
PROVIDED_PREFIXES = ("nvidia-", "cuda-")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
PYTHON_VERSION = "3.12"

CUDA_TESTS = ["tests/test_trans_cuda.py", "tests/test_trans_launch.py", "tests/test_trans_layout.py"]
# 200 updates per family and precision (24 trainings): its own step, last, so a short loan's
# --budget cuts it rather than the CUDA tests
PRECISION_TESTS = ["tests/test_precision_cuda.py"]
SMOKE_UPDATES = 30
MIN_STEP_SECONDS = 20    # under --budget, a step with less time left than this is not started


class LaneError(Exception):
    """A one-line error for the user (bad option, missing wheel, no GPU)."""


# --------------------------------------------------------------------------- names

def normalize(name: str) -> str:
    """PEP 503 name: ``ve_fairseq``, ``VE.Fairseq`` and ``ve-fairseq`` are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_project(filename: str) -> str:
    """The project name of a wheel file (PEP 427: ``name-version(-build)?-py-abi-plat.whl``)."""
    if not filename.endswith(".whl") or filename.count("-") < 4:
        raise LaneError(f"{filename}: not a wheel file name (name-version-python-abi-platform.whl)")
    return normalize(filename.split("-")[0])


def pinned(constraints: Path) -> List[str]:
    """``name==version`` lines of constraints.txt, less what the GPU machine provides."""
    out = []
    for n, line in enumerate(constraints.read_text().splitlines(), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if not m:
            raise LaneError(f"{constraints}:{n}: {line!r} is not 'name==version'")
        name = normalize(m.group(1))
        if name in PROVIDED or name.startswith(PROVIDED_PREFIXES):
            continue
        out.append(f"{m.group(1)}=={m.group(2)}")
    return out


def missing_wheels(wheels: List[Path], installed: set) -> List[Path]:
    """The wheels whose project the interpreter lacks (``installed``: normalized names).
    Two wheels of one project are an error: which one would be installed is unclear."""
    seen: Dict[str, Path] = {}
    for w in sorted(wheels):
        name = wheel_project(w.name)
        if name in seen:
            raise LaneError(f"two wheels of {name}: {seen[name].name} and {w.name}; keep one")
        seen[name] = w
    return [w for name, w in sorted(seen.items()) if name not in installed]


def installed_projects(exclude: Optional[Path] = None) -> set:
    """Normalized names of the distributions this interpreter sees, outside ``exclude``."""
    from importlib import metadata

    names = set()
    for dist in metadata.distributions():
        loc = getattr(dist, "_path", None)
        if exclude is not None and loc is not None and Path(loc).resolve().is_relative_to(exclude.resolve()):
            continue
        if dist.metadata["Name"]:
            names.add(normalize(dist.metadata["Name"]))
    return names


# --------------------------------------------------------------------------- commands

@dataclass
class Step:
    name: str           # e.g. "tests", "smoke:tp_transformer"
    cmd: List[str]
    timeout: int        # seconds
    kind: str           # "pytest", "prepare", "train", "bench"
    cwd: Optional[str] = None


def _train(py, data, save, arch_args, updates=SMOKE_UPDATES):
    return [py, "-m", "fairseq_cli.train", str(data), "--user-dir", str(REPO / "user_dir"), *arch_args,
            "--max-update", str(updates), "--save-dir", str(save), "--no-save", "--num-workers", "0",
            "--log-format", "simple", "--log-interval", "5", "--seed", "1", "--no-progress-bar"]


SMOKE = {
    # family: (data kind, fairseq-train arguments)
    "tp_transformer": ("pairs", ["--task", "translation", "-s", "src", "-t", "tgt", "--arch", "tp_transformer_tiny",
                                 "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "2000"]),
    "folnet": ("mono", ["--task", "masked_lm", "--arch", "folnet_tiny", "--criterion", "masked_lm",
                        "--folnet-trans-impl", "auto", "--tokens-per-sample", "32", "--sample-break-mode", "complete",
                        "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "16"]),
    "folnet_transformer": ("pairs", ["--task", "translation", "-s", "src", "-t", "tgt",
                                     "--arch", "folnet_transformer_tiny", "--share-all-embeddings",
                                     "--criterion", "cross_entropy", "--optimizer", "adam", "--lr", "1e-3",
                                     "--batch-size", "16"]),
    "memnet": ("qa", ["--task", "babi_qa", "--arch", "memnet_babi", "--embed-dim", "16", "--hops", "2",
                      "--max-story", "40", "--criterion", "cross_entropy", "--optimizer", "adam", "--lr", "0.01",
                      "--batch-size", "32"]),
    "stpr": ("qa", ["--task", "babi_qa", "--arch", "stpr_small", "--criterion", "cross_entropy",
                    "--optimizer", "adam", "--lr", "0.003", "--batch-size", "32"]),
    "tpru": ("pairs", ["--task", "translation", "-s", "src", "-t", "tgt", "--arch", "tpru_tiny",
                       "--criterion", "cross_entropy", "--optimizer", "adam", "--lr", "3e-3", "--max-tokens", "800"]),
}
STEPS = ("tests", "folnet_lean", "smoke", "bench_trans", "bench_qa", "precision")
ALIASES = {"bench": ("bench_trans", "bench_qa")}


def expand_steps(steps) -> List[str]:
    """The step groups in the order given, aliases (``bench``) expanded, each once."""
    bad = sorted(set(steps) - set(STEPS) - set(ALIASES))
    if bad:
        raise LaneError(f"--steps {','.join(bad)}: unknown; choose from {','.join(STEPS + tuple(ALIASES))}")
    out: List[str] = []
    for s in steps:
        for t in ALIASES.get(s, (s,)):
            if t not in out:
                out.append(t)
    return out


def plan(py: str, work: Path, steps, families=None, device: str = "cuda", tests=None) -> List[Step]:
    """Every command the lane runs (data preparation included), step groups in the order of
    ``steps``: a session short of device time puts first what it needs most."""
    families = list(SMOKE) if families is None else families
    unknown = sorted(set(families) - set(SMOKE))
    if unknown:
        raise LaneError(f"--families {','.join(unknown)}: unknown; choose from {','.join(SMOKE)}")
    tests = list(CUDA_TESTS) if not tests else tests
    missing = [t for t in tests if not (REPO / t.split("::")[0]).is_file()]
    if missing:
        raise LaneError(f"--tests {','.join(missing)}: no such test file in {REPO}")
    out: List[Step] = []
    for group in expand_steps(steps):
        out += _GROUPS[group](py, work, families, device, tests)
    return out


def _tests(py, work, families, device, tests) -> List[Step]:
    return [Step("tests", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *tests],
                 900, "pytest", str(REPO))]


def _smoke(py, work, families, device, tests) -> List[Step]:
    out: List[Step] = []
    kinds = sorted({SMOKE[f][0] for f in families})
    for kind in kinds:
        if kind == "qa":
            out.append(Step("data:qa", [py, "-m", "nesyseq.cli.main", "prepare", "qa", "--generate", "--out",
                                        str(work / "data" / "qa"), "--tasks", "1", "--num-names", "10",
                                        "--train-stories", "60", "--test-stories", "10"], 300, "prepare"))
        else:
            # the raw text files are written by the lane itself (write_corpora)
            pre = [py, "-m", "fairseq_cli.preprocess", "--destdir", str(work / "data" / kind / "bin"),
                   "--workers", "1"]
            raw = work / "data" / kind
            if kind == "mono":
                pre += ["--only-source", "--trainpref", str(raw / "train.txt"), "--validpref", str(raw / "valid.txt")]
            else:
                pre += ["--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
                        "--trainpref", str(raw / "train"), "--validpref", str(raw / "valid")]
            out.append(Step(f"data:{kind}", pre, 300, "prepare"))
    for fam in families:
        kind, args = SMOKE[fam]
        data = work / "data" / kind / ("bin/task1" if kind == "qa" else "bin")
        cmd = _train(py, data, work / "ckpt" / fam, args)
        if device == "cpu":
            cmd.append("--cpu")
        out.append(Step(f"smoke:{fam}", cmd, 600, "train"))
    return out


def _bench_trans(py, work, families, device, tests) -> List[Step]:
    # no torch.compile column (an empty --compile): max-autotune alone can take minutes
    return [Step("bench:trans", [py, str(REPO / "benchmarks" / "bench_trans.py"), "--T", "512", "1024",
                                 "--kinds", "causal", "encdec", "--decode", "--module", "--compile",
                                 "--markdown", str(work / "bench_trans.md")], 600, "bench", str(REPO))]


def _precision(py, work, families, device, tests) -> List[Step]:
    return [Step("precision", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *PRECISION_TESTS],
                 900, "pytest", str(REPO))]


def _folnet_lean(py, work, families, device, tests) -> List[Step]:
    # FOLNet's default (lean) path: a bf16 and an fp16 training step against fp32, and lean vs plain
    # step time and peak memory, folnet_base widths x 4 layers, batch 8 x T 256
    return [Step("bench:folnet_lean", [py, str(REPO / "benchmarks" / "bench_folnet_lean.py"), "--device", device,
                                       "--T", "256", "--batch", "8", "--layers", "4", "--repeats", "5",
                                       "--markdown", str(work / "folnet_lean.md")], 300, "bench", str(REPO))]


def _bench_qa(py, work, families, device, tests) -> List[Step]:
    # bAbI-shaped batches of 32 (the runs of docs/qa.md), on the lane's device
    return [Step("bench:qa_split", [py, str(REPO / "benchmarks" / "bench_qa_split.py"), "--device", device,
                                    "--updates", "50", "--repeats", "3",
                                    "--markdown", str(work / "bench_qa_split.md")], 600, "bench", str(REPO))]


_GROUPS = {"tests": _tests, "folnet_lean": _folnet_lean, "smoke": _smoke, "bench_trans": _bench_trans,
           "bench_qa": _bench_qa, "precision": _precision}


def write_corpora(work: Path, seed: int = 0) -> None:
    """Tiny synthetic corpora: 'pairs' (reverse a sequence of letters), 'mono' (sentences)."""
    import random

    rng = random.Random(seed)
    pairs = work / "data" / "pairs"
    pairs.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 400), ("valid", 40)):
        src = [" ".join(rng.choice("abcdefgh") for _ in range(rng.randint(3, 9))) for _ in range(n)]
        (pairs / f"{split}.src").write_text("".join(s + "\n" for s in src))
        (pairs / f"{split}.tgt").write_text("".join(" ".join(reversed(s.split())) + "\n" for s in src))
    mono = work / "data" / "mono"
    mono.mkdir(parents=True, exist_ok=True)
    words = ["the", "cat", "dog", "sat", "on", "a", "mat", "and", "ran", "far", "big", "red"]
    for split, n in (("train", 400), ("valid", 40)):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) for _ in range(n)]
        (mono / f"{split}.txt").write_text("".join(s + "\n" for s in lines))


def render(steps: List[Step], env: Dict[str, str]) -> str:
    """The plan as a shell transcript (what --dry-run prints)."""
    lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    for s in steps:
        prefix = f"cd {shlex.quote(s.cwd)} && " if s.cwd else ""
        lines.append(f"# {s.name} (limit {s.timeout}s)")
        lines.append(prefix + "timeout " + str(s.timeout) + " " + " ".join(shlex.quote(str(c)) for c in s.cmd))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- parsing results

def markdown_table(output: str) -> List[str]:
    """The last markdown table a benchmark printed (the fallback when it wrote no ``--markdown``
    file): from the last header row (a ``|`` line followed by a ``|---`` rule) on, its ``|``
    lines in order; other lines in between (a library warning on the merged stderr) are left
    out.  [] when it printed none."""
    lines = [ln for ln in output.splitlines() if ln.startswith("|")]
    heads = [i for i in range(len(lines) - 1) if lines[i + 1].startswith("|-")]
    return lines[heads[-1]:] if heads else []


def bench_table(cmd: List[str], output: str) -> List[str]:
    """A benchmark's table: the file it wrote with ``--markdown FILE`` (bench_trans.py), else
    what it printed (``markdown_table``)."""
    if "--markdown" in cmd:
        path = Path(cmd[cmd.index("--markdown") + 1])
        if path.is_file():
            return path.read_text(encoding="utf-8").rstrip("\n").splitlines()
    return markdown_table(output)


def pytest_counts(output: str) -> Dict[str, int]:
    """{"passed": n, "failed": n, ...} from pytest's last summary line ('== 3 passed, 1 skipped in 2s ==')."""
    for line in reversed(output.strip().splitlines()):
        found = re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)\b", line)
        if found and re.search(r"\bin [\d.]+s", line):
            counts: Dict[str, int] = {}
            for n, what in found:
                what = "error" if what.startswith("error") else what
                counts[what] = counts.get(what, 0) + int(n)
            return counts
    return {}


def train_figures(log: str) -> Dict[str, object]:
    """From a fairseq-train log (its command line first): updates reached, first and last
    logged train loss, updates per second and words per second of the last progress line,
    training time, and whether fairseq trained on a GPU (its CUDA environment lines)."""
    losses, ups, wps = [], None, None
    updates = None
    for line in log.splitlines():
        if "| train_inner |" in line or "| train |" in line:
            m = re.search(r"\bloss[= ]([\d.]+)", line)
            if m:
                losses.append(float(m.group(1)))
            m = re.search(r"\bups[= ]([\d.]+)", line)
            ups = float(m.group(1)) if m else ups
            m = re.search(r"\bwps[= ]([\d.]+)", line)
            wps = float(m.group(1)) if m else wps
            m = re.search(r"\bnum_updates[= ](\d+)", line)
            updates = int(m.group(1)) if m else updates
    m = re.search(r"done training in ([\d.]+) seconds", log)
    return {"updates": updates, "loss_first": losses[0] if losses else None,
            "loss_last": losses[-1] if losses else None, "ups": ups, "wps": wps,
            "train_seconds": float(m.group(1)) if m else None,
            # fairseq prints the CUDA environment only when it trains on CUDA devices
            "on_gpu": bool(re.search(r"rank\s+0: capabilities =", log)) and "--cpu" not in log.split("\n", 1)[0]}


def loss_curve(log: str) -> List[tuple]:
    """[(num_updates, train loss)] of every ``train_inner`` line of a fairseq-train log."""
    out = []
    for line in log.splitlines():
        if "| train_inner |" in line:
            m, u = re.search(r"\bloss[= ]([\d.]+)", line), re.search(r"\bnum_updates[= ](\d+)", line)
            if m and u:
                out.append((int(u.group(1)), float(m.group(1))))
    return out


def curve_deviation(ref: List[tuple], other: List[tuple], atol: float) -> float:
    """max over the updates logged in both of |other - ref| / (ref + atol): 0 for the same curve.
    A curve that misses a logged point of ``ref`` (it stopped, or diverged to NaN, which
    fairseq logs as 'nan' and the parser skips) deviates by infinity."""
    got = dict(other)
    worst = 0.0
    for u, l in ref:
        if u not in got:
            return float("inf")
        worst = max(worst, abs(got[u] - l) / (l + atol))
    return worst


@dataclass
class Result:
    step: Step
    returncode: int
    seconds: float
    log_tail: str
    counts: Dict[str, int] = field(default_factory=dict)
    figures: Dict[str, object] = field(default_factory=dict)
    table: List[str] = field(default_factory=list)      # a benchmark's markdown table lines

    @property
    def ok(self) -> bool:
        if self.returncode != 0:
            return False
        if self.step.kind == "pytest":
            return bool(self.counts.get("passed")) and not self.counts.get("failed") and not self.counts.get("error")
        if self.step.kind == "train":
            return self.figures.get("updates") == SMOKE_UPDATES
        return True


# --------------------------------------------------------------------------- summary

def _shown(arg) -> str:
    """A command argument as the summary shows it: paths in the repository relative to it, other
    absolute paths (the lane's work folder) by their file name only."""
    s = str(arg)
    if s.startswith(str(REPO) + os.sep):
        return s[len(str(REPO)) + 1:]
    return Path(s).name if os.path.isabs(s) else s


def _fmt(x, spec=""):
    return "–" if x is None else format(x, spec)


def summary_markdown(env: Dict[str, str], results: List[Result], when: _dt.datetime,
                     not_run: List[str] = (), pending: List[str] = ()) -> str:
    """The dated summary.  ``not_run``: steps skipped for want of --budget time; ``pending``:
    steps still to come (the lane rewrites the summary after every step, so a session cut
    short keeps what it measured)."""
    ok = all(r.ok for r in results)
    if not ok:
        verdict = "FAILED"
    elif pending:
        verdict = f"in progress, {len(results)} of {len(results) + len(pending)} steps run"
    elif not_run:
        verdict = f"INCOMPLETE, {len(not_run)} steps not run (budget)"
    else:
        verdict = "all steps passed"
    lines = [f"# GPU lane, {when:%Y-%m-%d %H:%M} UTC: {verdict}", "",
             "Written by `make test-gpu` (tools/gpu_lane.py); docs/testing.md describes the lane.", "",
             "| | |", "|---|---|"]
    for k in ("gpu", "driver", "python", "torch", "cuda", "triton", "fairseq", "commit"):
        lines.append(f"| {k} | {env.get(k, '–')} |")
    tests = [r for r in results if r.step.kind == "pytest"]
    if tests:
        lines += ["", "## CUDA tests", "", "| step | passed | failed | skipped | errors | seconds | ok |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for r in tests:
            c = r.counts
            lines.append(f"| {r.step.name} | {c.get('passed', 0)} | {c.get('failed', 0)} | {c.get('skipped', 0)} "
                         f"| {c.get('error', 0)} | {r.seconds:.0f} | {'yes' if r.ok else 'NO'} |")
    smoke = [r for r in results if r.step.kind == "train"]
    if smoke:
        lines += ["", f"## Training smoke runs ({SMOKE_UPDATES} updates each, fairseq-train)", "",
                  "| family | updates | on GPU | loss first → last | updates/s | words/s | train s | ok |",
                  "|---|---:|---|---|---:|---:|---:|---|"]
        for r in smoke:
            f = r.figures
            lines.append(f"| {r.step.name.split(':', 1)[1]} | {_fmt(f.get('updates'))} | "
                         f"{'yes' if f.get('on_gpu') else 'no'} | {_fmt(f.get('loss_first'), '.3f')} → "
                         f"{_fmt(f.get('loss_last'), '.3f')} | {_fmt(f.get('ups'), '.1f')} | "
                         f"{_fmt(f.get('wps'), '.0f')} | {_fmt(f.get('train_seconds'), '.1f')} | "
                         f"{'yes' if r.ok else 'NO'} |")
    other = [r for r in results if r.step.kind in ("prepare", "bench")]
    if other:
        lines += ["", "## Other steps", "", "| step | exit | seconds |", "|---|---:|---:|"]
        for r in other:
            lines.append(f"| {r.step.name} | {r.returncode} | {r.seconds:.0f} |")
    for r in (r for r in results if r.step.kind == "bench" and r.table):
        lines += ["", f"## {r.step.name}", "", "`" + " ".join(shlex.quote(_shown(c)) for c in r.step.cmd[1:]) + "`",
                  "", *r.table]
    failed = [r for r in results if not r.ok]
    for r in failed:
        lines += ["", f"### {r.step.name}: exit {r.returncode}", "", "```", r.log_tail.rstrip(), "```"]
    if not_run:
        lines += ["", "## Not run: the --budget was spent", "", *[f"- {n}" for n in not_run]]
    if pending:
        lines += ["", "## Still to run", "", *[f"- {n}" for n in pending]]
    return "\n".join(lines) + "\n"


def atomic_write_text(path: Path, text: str) -> None:
    """The summary, written whole (nesyseq.common.atomic) into a folder made if missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write_text(path, text)


def summary_path(docs: Path, when: _dt.datetime, gpu: str) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"
    return docs / "gpu_runs" / f"{when:%Y-%m-%d_%H%M}_{slug}.md"


# --------------------------------------------------------------------------- the two commands

def cmd_wheels(args) -> int:
    dest = Path(args.dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    reqs = pinned(Path(args.constraints))
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
            PYTHON_VERSION, "--implementation", "cp", "-d", str(dest)]
    for p in PLATFORMS:
        base += ["--platform", p]
    sdist_only = []
    for req in reqs:
        print(f"wheels: {req}", flush=True)
        if args.dry_run:
            continue
        r = subprocess.run(base + [req], capture_output=True, text=True)
        if r.returncode != 0:
            sdist_only.append(req)
    for req in sdist_only:
        # only a source archive: fine if it builds into a pure-Python wheel (py3-none-any)
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp, req],
                               capture_output=True, text=True)
            built = list(Path(tmp).glob("*.whl"))
            if r.returncode != 0 or len(built) != 1:
                raise LaneError(f"{req}: no cp312 manylinux wheel and no buildable source archive:\n"
                                + (r.stderr or r.stdout).strip()[-1500:])
            if not built[0].name.endswith("-none-any.whl"):
                raise LaneError(f"{req}: no cp312 manylinux wheel, and the local build {built[0].name} "
                                "is platform specific")
            shutil.move(str(built[0]), dest / built[0].name)
            print(f"wheels: {req} built from its source archive ({built[0].name})", flush=True)
    if not args.dry_run:
        n = len(list(dest.glob("*.whl")))
        print(f"wheels: {n} files in {dest}; copy this folder to the GPU machine with the repository")
    return 0


def gather_env(py: str, site: Optional[Path] = None) -> Dict[str, str]:
    code = ("import json, sys, torch\n"
            "try:\n import triton; tv = triton.__version__\nexcept Exception as e: tv = 'missing'\n"
            "try:\n import fairseq; fv = fairseq.__version__\nexcept Exception as e: fv = 'missing'\n"
            "print(json.dumps({'python': sys.version.split()[0], 'torch': torch.__version__,"
            " 'cuda': str(torch.version.cuda), 'cuda_available': torch.cuda.is_available(),"
            " 'gpu': torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none',"
            " 'triton': tv, 'fairseq': fv}))")
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, env=lane_env(site))
    if r.returncode != 0:
        raise LaneError(f"{py}: cannot import torch:\n{r.stderr.strip()[-1000:]}")
    env = json.loads(r.stdout.strip().splitlines()[-1])
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True)
        env["driver"] = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else "?"
    env["commit"] = repo_commit()
    return env


def repo_commit(repo: Path = REPO) -> str:
    """The short HEAD, with '+N modified' when tracked files differ from it: a device machine's
    copy of the repository can carry a .git older than its working tree (2026-11-27: the summary
    named the session's first commit while the tree was three commits on)."""
    g = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    head = g.stdout.strip() or "?"
    st = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                        capture_output=True, text=True)
    n = len(st.stdout.splitlines()) if st.returncode == 0 else 0
    return f"{head}+{n} modified" if n else head


def lane_env(site: Optional[Path]) -> Dict[str, str]:
    env = dict(os.environ)
    parts = ([str(site)] if site else []) + [str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    env.pop("TRITON_INTERPRET", None)
    return env


def install(py: str, wheels_dir: Path, site: Path) -> List[str]:
    """Install into ``site`` (replaced as a whole) the wheels for what ``py`` lacks."""
    wheels = list(wheels_dir.glob("*.whl"))
    if not wheels:
        raise LaneError(f"--wheels {wheels_dir}: no .whl files; run `make gpu-wheels` on a machine with network "
                        "and copy the folder here")
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import gpu_lane; "
            "print(json.dumps(sorted(gpu_lane.installed_projects(exclude=__import__('pathlib').Path(sys.argv[2])))))")
    r = subprocess.run([py, "-c", code, str(Path(__file__).parent), str(site)], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    if r.returncode != 0:
        raise LaneError(f"{py}: cannot list its installed packages:\n{r.stderr.strip()[-1000:]}")
    todo = missing_wheels(wheels, set(json.loads(r.stdout)))
    tmp = site.with_name(site.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if todo:
        p = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-deps", "--target", str(tmp),
                            *map(str, todo)], capture_output=True, text=True)
        if p.returncode != 0:
            raise LaneError("pip install from the wheels failed:\n" + (p.stderr or p.stdout).strip()[-2000:])
    else:
        tmp.mkdir(parents=True)
    shutil.rmtree(site, ignore_errors=True)
    os.replace(tmp, site)
    return [w.name for w in todo]


def run_step(cmd: List[str], cwd: str, env: Dict[str, str], limit: int):
    """(exit code, merged output) of one step; 124 and the output so far when it outran ``limit``.
    The step runs in its own process group, and the whole group is killed at the limit: a child
    it left behind (a compile worker) would otherwise hold the pipe open and stall the lane."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = p.communicate()
        rc = 124
    return rc, out.decode(errors="replace")


def cmd_run(args) -> int:
    started = time.time()  # --budget counts from here: the wheel install is part of it
    py = args.python
    work = Path(args.work).resolve()
    steps_wanted = [s for s in args.steps.split(",") if s]
    families = [f for f in args.families.split(",") if f] if args.families else None
    device = "cpu" if args.cpu else "cuda"
    tests = [t for t in args.tests.split(",") if t] if args.tests else None
    steps = plan(py, work, steps_wanted, families, device, tests)
    site = Path(args.site).resolve()
    if args.dry_run:
        print(f"# would install into {site} the wheels of {Path(args.wheels).resolve()} that {py} lacks")
        print(render(steps, {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}), end="")
        return 0
    env_info = gather_env(py)
    if device == "cuda" and not env_info.get("cuda_available"):
        raise LaneError(f"{py}: torch {env_info.get('torch')} sees no CUDA device; the GPU lane needs one "
                        "(--cpu runs the smoke step on CPU, for checking the commands only)")
    if args.no_install:
        site = None
    else:
        installed = install(py, Path(args.wheels).resolve(), site)
        print(f"installed {len(installed)} wheels into {site}", flush=True)
        env_info = gather_env(py, site)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    write_corpora(work)
    env = lane_env(site)
    (work / "logs").mkdir()
    results: List[Result] = []
    not_run: List[str] = []
    path = Path(args.summary) if args.summary else None

    def write_summary(pending: List[str]) -> str:
        nonlocal path
        when = _dt.datetime.now(_dt.timezone.utc)
        path = path or summary_path(REPO / "docs", when, env_info.get("gpu", "gpu"))
        text = summary_markdown(env_info, results, when, not_run, pending)
        atomic_write_text(path, text)
        return text

    deadline = started + args.budget if args.budget > 0 else None
    for i, s in enumerate(steps):
        limit = s.timeout
        if deadline is not None:
            limit = min(limit, int(deadline - time.time()))
            if limit < MIN_STEP_SECONDS:
                not_run.append(s.name)
                print(f"=== {s.name}: not run, {max(limit, 0)}s of the budget left", flush=True)
                continue
        t0 = time.time()
        print(f"=== {s.name} (limit {limit}s)", flush=True)
        rc, out = run_step(s.cmd, s.cwd or str(work), env, limit)
        (work / "logs" / f"{s.name.replace(':', '_')}.log").write_text(out)
        r = Result(s, rc, time.time() - t0, "\n".join(out.strip().splitlines()[-30:]))
        if s.kind == "pytest":
            r.counts = pytest_counts(out)
        elif s.kind == "train":
            r.figures = train_figures(" ".join(map(str, s.cmd)) + "\n" + out)
        elif s.kind == "bench":
            r.table = bench_table([str(c) for c in s.cmd], out)
        results.append(r)
        print(f"    {'ok' if r.ok else 'FAILED'} ({r.seconds:.0f}s)", flush=True)
        write_summary([t.name for t in steps[i + 1:]])
    print(write_summary([]))
    print(f"summary: {path}\nlogs: {work / 'logs'}")
    return 0 if all(r.ok for r in results) and not not_run else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("wheels", help="download the cp312 manylinux wheels the GPU machine lacks")
    w.add_argument("--dest", default=str(REPO / ".whl"))
    w.add_argument("--constraints", default=str(REPO / "constraints.txt"))
    w.add_argument("--dry-run", action="store_true", help="list the requirements, download nothing")
    w.set_defaults(func=cmd_wheels)
    r = sub.add_parser("run", help="install what is missing, run the CUDA tests and smoke runs, write the summary")
    r.add_argument("--python", default=sys.executable, help="the interpreter with torch and triton (default: this one)")
    r.add_argument("--wheels", default=str(REPO / ".whl"))
    r.add_argument("--site", default="/tmp/nesyseq-gpu-site", help="where the wheels are installed (--target)")
    r.add_argument("--work", default="/tmp/nesyseq-gpu-lane", help="data, checkpoints and logs of this run")
    r.add_argument("--steps", default="tests,folnet_lean,smoke,bench,precision",
                   help=f"comma-separated, run in this order: {', '.join(STEPS)} (bench = bench_trans,bench_qa)")
    r.add_argument("--budget", type=int, default=0,
                   help="seconds for the whole run from its start (the wheel install included): each step's time limit is cut to what is left, a step "
                        "with under %d s left is not run; the summary is rewritten after every step" % MIN_STEP_SECONDS)
    r.add_argument("--tests", default="", help="the tests step's files, comma-separated (default: "
                   + ",".join(CUDA_TESTS) + ")")
    r.add_argument("--families", default="", help=f"smoke runs only for these (default all: {','.join(SMOKE)})")
    r.add_argument("--summary", default="", help="summary path (default docs/gpu_runs/<date>_<gpu>.md)")
    r.add_argument("--no-install", action="store_true", help="use what the interpreter has; install nothing")
    r.add_argument("--cpu", action="store_true", help="smoke runs on CPU (checks the commands; not the GPU lane)")
    r.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    r.set_defaults(func=cmd_run)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except LaneError as e:
        print(f"gpu_lane: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
