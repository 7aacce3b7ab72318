"""Generate the Mathematics Dataset (Saxton et al., 2019) with DeepMind's generator.

Every problem comes from the ``mathematics_dataset`` package (imported through
:mod:`data_prep.math_compat`); nothing here writes a problem by hand.  Output is
DeepMind's own file format, one file per (split, module)::

    RAW/train-easy/<module>.txt      question and answer on alternating lines
    RAW/train-medium/<module>.txt
    RAW/train-hard/<module>.txt
    RAW/interpolate/<module>.txt     the same 56 modules, test entropy
    RAW/extrapolate/<module>.txt     the 15 extrapolation modules

Module selection
    ``modules`` is a comma-separated list of glob patterns (``fnmatch``, case
    sensitive) over the 56 train/interpolate module names, e.g.
    ``algebra__linear_1d,arithmetic__add_*``.  A pattern that matches nothing is
    an error.  An extrapolate module is generated when its *family* is selected:
    the family of an extrapolate module is the longest train module name ``T``
    such that the extrapolate name equals ``T`` or starts with ``T + "_"``
    (``arithmetic__add_or_sub_big`` -> ``arithmetic__add_or_sub``,
    ``arithmetic__mul_div_multiple_longer`` -> ``arithmetic__mul_div_multiple``,
    ``measurement__conversion`` -> ``measurement__conversion``).  All 15
    extrapolate modules have a family; :func:`extrapolate_family` asserts it.

Counts
    ``per_module`` training examples per module across the three difficulties,
    ``per_module // 3`` each, exactly as DeepMind's ``--per_train_module``
    (``mathematics_dataset/generate.py:108-111``); ``per_module=2_000_000`` is the
    released v1.0 size (666,666 per difficulty).  ``test_per_module`` examples per
    interpolate / extrapolate module (default ``max(10, per_module // 30)``).
    As in DeepMind's ``generate.py``, samples whose question is longer than 160
    or whose answer is longer than 30 characters are dropped and re-drawn.

Determinism
    Each (split, module) job is seeded from ``sha256(seed, split, module)``, so
    its file does not depend on the worker count, on job order or on which other
    modules are selected.  The generator draws from Python's ``random`` *and*
    ``numpy.random`` (e.g. ``np.random.dirichlet`` in ``util/composition.py``);
    both are seeded per job.  It also iterates over sets of strings
    (``random.choice(list(allowed_symbols))`` in ``Context.pop``), whose order
    depends on Python's string hashing, so jobs always run in worker subprocesses
    (``python -m nesyseq.data_prep.math_generate --worker``) started with a fixed
    ``PYTHONHASHSEED``; sympy's cache is cleared
    before each job so a reused worker behaves like a fresh one.

Resume and atomicity
    A file is written to ``<module>.txt.tmp-<pid>``, fsync'ed and moved into
    place with ``os.replace``; then a completion marker ``<module>.txt.done``
    (JSON: seed, count, generator version, sha256 of the file) is written the
    same way.  A later run skips a job only when the marker exists, its
    parameters match and the file's sha256 equals the recorded one; partial
    ``.tmp-*`` files of an interrupted run are removed and their jobs redone.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import pathlib
import sys
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from nesyseq.common.atomic import atomic_write_bytes

TRAIN_SPLITS = ("train-easy", "train-medium", "train-hard")
TEST_SPLITS = ("interpolate", "extrapolate")
SPLITS = TRAIN_SPLITS + TEST_SPLITS
_DIFFICULTY = {"train-easy": 0, "train-medium": 1, "train-hard": 2}

MARKER_SUFFIX = ".done"
FORMAT_VERSION = 1


def _user_error(message: str) -> Exception:
    from nesyseq.common.errors import UserError

    return UserError(message)


# --------------------------------------------------------------------------
# module names
# --------------------------------------------------------------------------


def _flatten(tree, prefix=None, out=None) -> Dict[str, object]:
    """``{'algebra': {'linear_1d': fn}}`` -> ``{'algebra__linear_1d': fn}`` (DeepMind's naming)."""
    out = {} if out is None else out
    for key, value in tree.items():
        name = f"{prefix}__{key}" if prefix is not None else key
        if isinstance(value, dict):
            _flatten(value, name, out)
        else:
            out[name] = value
    return out


def _entropy_fn(level: int, num_levels: int = 3):
    """DeepMind's ``generate._make_entropy_fn``: the level-th third of the entropy range."""
    lower = level / num_levels
    upper = (level + 1) / num_levels

    def modify_entropy(range_):
        assert len(range_) == 2
        length = range_[1] - range_[0]
        return (range_[0] + lower * length, range_[0] + upper * length)

    return modify_entropy


def _split_modules(split: str) -> Dict[str, object]:
    """Name -> problem function for one split (fresh module objects)."""
    from nesyseq.data_prep.math_compat import load_generator

    modules = load_generator()
    if split in _DIFFICULTY:
        tree = modules.train(_entropy_fn(_DIFFICULTY[split]))
    elif split == "interpolate":
        tree = modules.test()
    elif split == "extrapolate":
        tree = modules.test_extra()
    else:  # pragma: no cover - programming error
        raise ValueError(f"unknown split {split!r}")
    return _flatten(tree)


_NAMES_CACHE: Dict[str, List[str]] = {}


def module_names(split: str = "interpolate") -> List[str]:
    """Sorted module names of a split ('train-*' and 'interpolate' share the 56 names)."""
    key = "extrapolate" if split == "extrapolate" else "interpolate"
    if key not in _NAMES_CACHE:
        _NAMES_CACHE[key] = sorted(_split_modules(key))
    return list(_NAMES_CACHE[key])


def extrapolate_family(name: str, train_names: Optional[Sequence[str]] = None) -> Optional[str]:
    """The train module an extrapolate module belongs to (longest ``T`` with name == T or T_...)."""
    train_names = module_names("interpolate") if train_names is None else train_names
    best = None
    for t in train_names:
        if name == t or name.startswith(t + "_"):
            if best is None or len(t) > len(best):
                best = t
    return best


def resolve_modules(patterns: str = "*",
                    train_names: Optional[Sequence[str]] = None,
                    extrapolate_names: Optional[Sequence[str]] = None) -> Tuple[List[str], List[str]]:
    """Expand ``patterns`` to (train/interpolate modules, extrapolate modules), both sorted.

    Raises ``UserError`` naming the pattern when one matches no module.
    """
    train_names = module_names("interpolate") if train_names is None else list(train_names)
    extrapolate_names = module_names("extrapolate") if extrapolate_names is None else list(extrapolate_names)
    pats = [p.strip() for p in (patterns or "*").split(",") if p.strip()]
    if not pats:
        raise _user_error("--modules: empty module pattern; run `nesyseq prepare math --list-modules`")
    selected = set()
    for pat in pats:
        hits = [n for n in train_names if fnmatch.fnmatchcase(n, pat)]
        if not hits:
            import difflib

            family = pat.split("*")[0].split("?")[0].split("[")[0].split("__")[0]
            close = difflib.get_close_matches(pat, train_names, n=4, cutoff=0.6)
            close += [n for n in train_names if family and n.startswith(family) and n not in close]
            extra = [n for n in extrapolate_names if fnmatch.fnmatchcase(n, pat)]
            fams = sorted({f for f in (extrapolate_family(n, train_names) for n in extra) if f})
            hint = ""
            if fams:
                hint = (f" (extrapolate module(s) {', '.join(extra)} are selected through their "
                        f"family: use {','.join(fams)})")
            examples = (close or train_names)[:5]
            raise _user_error(
                f"--modules: unknown module pattern {pat!r}{hint}; valid names include "
                f"{', '.join(examples)}, ... (all {len(train_names)}: `nesyseq prepare math --list-modules`)")
        selected.update(hits)
    extrapolate = [n for n in extrapolate_names if extrapolate_family(n, train_names) in selected]
    return sorted(selected), sorted(extrapolate)


# --------------------------------------------------------------------------
# jobs
# --------------------------------------------------------------------------


def job_seed(seed: int, split: str, module: str) -> int:
    """Stable 63-bit seed of one (split, module) job (independent of PYTHONHASHSEED)."""
    digest = hashlib.sha256(f"{int(seed)}\0{split}\0{module}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def hash_seed_for(seed: int) -> str:
    """PYTHONHASHSEED for the worker processes (0..2**32-1, derived from the seed)."""
    return str(job_seed(seed, "PYTHONHASHSEED", "") % (2 ** 32))


@dataclass(frozen=True)
class Job:
    split: str
    module: str
    count: int
    seed: int  # the run's seed; the job's own seed is job_seed(seed, split, module)
    path: str  # final file

    @property
    def marker(self) -> str:
        return self.path + MARKER_SUFFIX

    def params(self) -> dict:
        from importlib import metadata

        try:
            version = metadata.version("mathematics-dataset")
        except metadata.PackageNotFoundError:  # pragma: no cover
            version = "unknown"
        return {"format": FORMAT_VERSION, "split": self.split, "module": self.module,
                "count": self.count, "seed": self.seed,
                "job_seed": job_seed(self.seed, self.split, self.module),
                "mathematics_dataset": version}


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_complete(job: Job) -> bool:
    """True when the job's marker matches its parameters and the file's checksum."""
    try:
        with open(job.marker, encoding="utf-8") as f:
            marker = json.load(f)
    except (OSError, ValueError):
        return False
    if marker.get("params") != job.params():
        return False
    try:
        return marker.get("sha256") == _sha256(job.path)
    except OSError:
        return False


def sample_problem(module_fn, max_question: int, max_answer: int) -> Tuple[str, str, int]:
    """DeepMind's ``generate.sample_from_module`` without its absl flags."""
    dropped = 0
    while True:
        problem = module_fn()
        question = str(problem.question)
        if len(question) > max_question:
            dropped += 1
            continue
        answer = str(problem.answer)
        if len(answer) > max_answer:
            dropped += 1
            continue
        return question, answer, dropped


def run_job(job: Job) -> dict:
    """Generate one (split, module) file.  Runs inside a worker process."""
    import random

    import numpy as np

    from nesyseq.data_prep.math_compat import generate_settings

    settings = generate_settings()
    try:
        from sympy.core.cache import clear_cache

        clear_cache()
    except ImportError:  # pragma: no cover
        pass
    s = job_seed(job.seed, job.split, job.module)
    random.seed(s)
    np.random.seed(s % (2 ** 32))
    module_fn = _split_modules(job.split)[job.module]
    lines = []
    dropped = 0
    for _ in range(job.count):
        q, a, d = sample_problem(module_fn, settings.MAX_QUESTION_LENGTH, settings.MAX_ANSWER_LENGTH)
        if "\n" in q or "\n" in a:  # never seen; would break the alternating-line format
            raise RuntimeError(f"{job.split}/{job.module}: generator produced a newline")
        lines.append(q)
        lines.append(a)
        dropped += d
    data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    os.makedirs(os.path.dirname(job.path), exist_ok=True)
    atomic_write_bytes(job.path, data)
    marker = {"params": job.params(), "sha256": hashlib.sha256(data).hexdigest(),
              "examples": job.count, "dropped": dropped}
    atomic_write_bytes(job.marker, (json.dumps(marker, indent=1, sort_keys=True) + "\n").encode())
    return {"split": job.split, "module": job.module, "count": job.count, "dropped": dropped}


def _run_job_safe(job: Job):
    try:
        return True, run_job(job)
    except Exception as exc:  # report which job failed; the pool would hide it
        import traceback

        return False, f"{job.split}/{job.module}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"


# --------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------


def plan_jobs(raw_dir, train_modules: Iterable[str], extrapolate_modules: Iterable[str],
              per_module: int, test_per_module: int, seed: int) -> List[Job]:
    raw_dir = str(raw_dir)
    train_modules = list(train_modules)
    jobs = []
    for split in TRAIN_SPLITS + ("interpolate",):
        n = per_module // len(TRAIN_SPLITS) if split in TRAIN_SPLITS else test_per_module
        jobs += [Job(split, m, n, seed, os.path.join(raw_dir, split, m + ".txt")) for m in train_modules]
    jobs += [Job("extrapolate", m, test_per_module, seed, os.path.join(raw_dir, "extrapolate", m + ".txt"))
             for m in extrapolate_modules]
    return jobs


def _remove_stale_tmp(raw_dir: str) -> int:
    """Remove the ``.tmp-PID…`` files of runs that are gone (never those of a live process)."""
    from nesyseq.common.out_folder import is_stale

    n = 0
    for split in SPLITS:
        d = os.path.join(raw_dir, split)
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if ".tmp-" in name and is_stale(name):
                os.remove(os.path.join(d, name))
                n += 1
    return n


def default_test_per_module(per_module: int) -> int:
    return max(10, int(per_module) // 30)


def generate_math(raw_dir, modules: str = "*", per_module: int = 300,
                  test_per_module: Optional[int] = None, seed: int = 0, workers: int = 1,
                  progress: bool = True, before_changes=None) -> dict:
    """Generate (or complete) ``raw_dir/<split>/<module>.txt`` for the selected modules;
    ``before_changes()`` is called once before the first file is (re)written, if any is.

    Returns ``{"generated": [...], "skipped": [...], "train_modules": [...],
    "extrapolate_modules": [...]}`` with ``"split/module"`` entries.
    """
    if int(per_module) < len(TRAIN_SPLITS):
        raise _user_error(f"--per-module must be >= 3 (it is split evenly over train-easy, "
                          f"train-medium and train-hard), got {per_module}")
    test_per_module = default_test_per_module(per_module) if test_per_module is None else int(test_per_module)
    if test_per_module < 1:
        raise _user_error(f"--test-per-module must be >= 1, got {test_per_module}")
    workers = max(1, int(workers))
    train_modules, extrapolate_modules = resolve_modules(modules)
    raw_dir = str(raw_dir)
    os.makedirs(raw_dir, exist_ok=True)
    _remove_stale_tmp(raw_dir)
    jobs = plan_jobs(raw_dir, train_modules, extrapolate_modules, int(per_module), test_per_module, int(seed))
    todo = [j for j in jobs if not is_complete(j)]
    done = [f"{j.split}/{j.module}" for j in jobs if j not in todo]
    generated = []
    if todo:
        if before_changes is not None:
            before_changes()
        generated = _run_jobs(todo, workers, int(seed), progress)
    return {"generated": generated, "skipped": done, "train_modules": train_modules,
            "extrapolate_modules": extrapolate_modules, "per_module": int(per_module),
            "test_per_module": test_per_module, "seed": int(seed)}


def _cost(job: Job) -> float:
    # slow modules first so the pool's tail is short (measured s/example, rough)
    slow = {"probability": 0.1, "arithmetic__simplify_surd": 0.06}
    per = 0.01
    for key, value in slow.items():
        if job.module.startswith(key):
            per = value
    if job.split == "extrapolate" and job.module.startswith("probability"):
        per = 0.8
    return per * job.count


def _worker_command() -> List[str]:
    return [sys.executable, "-m", "nesyseq.data_prep.math_generate", "--worker"]


def _run_jobs(todo: List[Job], workers: int, seed: int, progress: bool) -> List[str]:
    """Run ``todo`` on ``workers`` worker processes, slowest jobs first.

    Workers are plain subprocesses (``python -m nesyseq.data_prep.math_generate --worker``)
    rather than a ``multiprocessing`` pool: they need their own fixed
    ``PYTHONHASHSEED`` (see the module docstring), and this way they never
    re-import the caller's ``__main__``.  Jobs and results travel as JSON lines.
    """
    import queue
    import subprocess
    import threading

    from tqdm import tqdm

    pending = sorted(todo, key=_cost, reverse=True)
    lock = threading.Lock()
    results: "queue.Queue" = queue.Queue()
    env = dict(os.environ, PYTHONHASHSEED=hash_seed_for(seed), PYTHONWARNINGS="ignore")
    # the folder that holds the nesyseq package (an installed one, or a source checkout)
    import importlib.util

    root = str(pathlib.Path(importlib.util.find_spec("nesyseq").origin).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs = [subprocess.Popen(_worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=env, text=True, encoding="utf-8")
             for _ in range(min(workers, len(pending)))]

    def feed(proc):
        while True:
            with lock:
                if not pending:
                    break
                job = pending.pop(0)
            try:
                proc.stdin.write(json.dumps(job.__dict__) + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
            except (OSError, ValueError) as exc:
                line, err = "", exc
            else:
                err = None
            if not line:
                results.put((False, f"{job.split}/{job.module}: worker {proc.pid} died "
                                    f"(exit {proc.poll()}{'; ' + str(err) if err else ''})"))
                return
            ok, res = json.loads(line)
            results.put((ok, res))
            if not ok:
                return
        results.put(None)  # this worker is done

    threads = [threading.Thread(target=feed, args=(p,), daemon=True) for p in procs]
    for t in threads:
        t.start()
    bar = tqdm(total=sum(j.count for j in todo), unit="ex", desc="generate math",
               disable=not progress, dynamic_ncols=True)
    generated: List[str] = []
    finished = 0
    try:
        while finished < len(procs):
            item = results.get()
            if item is None:
                finished += 1
                continue
            ok, res = item
            if not ok:
                raise RuntimeError(f"generation failed: {res}")
            generated.append(f"{res['split']}/{res['module']}")
            bar.update(res["count"])
            bar.set_postfix_str(f"{res['split']}/{res['module']}", refresh=False)
    finally:
        bar.close()
        with lock:
            pending.clear()
        for p in procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return sorted(generated)


def _worker_main() -> int:  # pragma: no cover - runs in the worker subprocesses
    """Read Job JSON lines on stdin, write ``[ok, result]`` JSON lines on stdout."""
    import warnings

    warnings.simplefilter("ignore")
    out = sys.stdout
    sys.stdout = sys.stderr  # anything the generator prints must not corrupt the protocol
    from nesyseq.data_prep.math_compat import load_generator

    load_generator()
    for line in sys.stdin:
        if not line.strip():
            continue
        ok, res = _run_job_safe(Job(**json.loads(line)))
        out.write(json.dumps([ok, res]) + "\n")
        out.flush()
    return 0


def list_modules_text() -> str:
    """Human-readable listing for ``--list-modules``."""
    train = module_names("interpolate")
    extra = module_names("extrapolate")
    lines = [f"train-easy/medium/hard and interpolate modules ({len(train)}):"]
    lines += [f"  {n}" for n in train]
    lines.append(f"extrapolate modules ({len(extra)}), with the family that selects them:")
    lines += [f"  {n}  <- {extrapolate_family(n, train)}" for n in extra]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["--worker"]:
        sys.exit(_worker_main())
    print(list_modules_text())
