"""How nesyseq runs the stock fairseq command-line tools."""
import os
import sys
from pathlib import Path

USER_DIR = Path(__file__).resolve().parents[1] / "user_dir"  # what --user-dir points at


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
