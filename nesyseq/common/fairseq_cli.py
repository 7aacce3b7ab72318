"""How nesyseq runs the stock fairseq command-line tools."""
import os
import sys
from pathlib import Path


def _user_dir() -> Path:
    """What --user-dir points at: ``nesyseq/user_dir`` of an installed nesyseq, or the
    repository's ``user_dir/`` in a source checkout (``nesyseq user-dir`` prints it)."""
    package = Path(__file__).resolve().parents[1]          # .../nesyseq
    for candidate in (package / "user_dir", package.parent / "user_dir"):
        if (candidate / "__init__.py").is_file():
            return candidate
    raise FileNotFoundError(f"no user_dir/ in {package} or beside it")


USER_DIR = _user_dir()


def fairseq_bin(name: str) -> str:
    """``fairseq-train`` etc. from this interpreter's environment, else from PATH."""
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else name


def small_cpu_env(cpu: bool = True) -> dict:
    """The environment for a child process; on CPU, one intra-op thread unless the user
    chose otherwise: a small model gains nothing from more, and on a busy 2-core
    box they spin against each other and a step gets many times slower."""
    env = dict(os.environ)
    if cpu:
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def fairseq_generate(cmd_args, out_dir: Path, subset: str, cpu: bool, what: str) -> Path:
    """Run ``fairseq-generate`` with ``cmd_args`` (everything after the executable; it must
    include ``--results-path out_dir``), keep its whole output in ``generate-SUBSET.log`` and
    return the ``generate-SUBSET.txt`` it wrote.  A failure is a one-line ``UserError``
    naming ``what``, the log's last line and the log; the partial (often empty)
    ``generate-SUBSET.txt`` of a failed run is removed, so no result file is left that looks like one."""
    import subprocess

    from nesyseq.common.errors import UserError

    cmd = [fairseq_bin("fairseq-generate")] + [str(a) for a in cmd_args]
    if cpu:
        cmd.append("--cpu")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=small_cpu_env(cpu))
    log = Path(out_dir) / f"generate-{subset}.log"
    log.write_text(proc.stdout)
    result = Path(out_dir) / f"generate-{subset}.txt"
    if proc.returncode != 0:
        try:
            result.unlink()
        except FileNotFoundError:
            pass
        lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
        last = lines[-1][:300] if lines else f"exit status {proc.returncode}"
        raise UserError(f"fairseq-generate failed on {what}: {last} (whole log: {log})")
    return result
