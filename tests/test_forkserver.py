"""tests/forkserver.py: an intercepted command behaves as the same command in a fresh process
(output, exit status, environment, working directory, stdin, timeout), and only the
fairseq/nesyseq command lines are intercepted."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkserver

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_only_our_command_lines_are_served():
    py = sys.executable
    assert forkserver.served_command([py, "-m", "fairseq_cli.train", "d"]) == \
        ("module", [py, "-m", "fairseq_cli.train", "d"], False)
    assert forkserver.served_command([py, "-u", "-m", "nesyseq.cli.main", "launch"]) == \
        ("module", [py, "-m", "nesyseq.cli.main", "launch"], True)
    script = str(BIN / "fairseq-generate")
    assert forkserver.served_command([py, script, "d"]) == ("script", [script, "d"], False)
    for plain in ([py, "-c", "print(1)"], [py, "-m", "pytest"], [py, "script.py"], [py, "/usr/bin/fairseq-train"],
                  [py, "-X", "importtime", "-m", "fairseq_cli.train"], [py, "-m"], [py], None):
        assert forkserver.served_command(plain) is None, plain


def _served_pid(tmp_path, argv, **kw):
    """Runs ``argv`` and returns (the completed process, the pid of the served child or None)."""
    pidfile = tmp_path / "served.pid"
    pidfile.unlink(missing_ok=True)
    env = dict(kw.pop("env", os.environ), NESYSEQ_FORKSERVER_PIDFILE=str(pidfile))
    r = subprocess.run(argv, capture_output=True, text=True, env=env, **kw)
    return r, (int(pidfile.read_text()) if pidfile.exists() else None)


@pytest.mark.skipif(os.environ.get("NESYSEQ_TEST_FORKSERVER") == "0", reason="fork server off")
def test_the_commands_of_a_command_are_served_too(tmp_path):
    """A served command's own children (a launcher's stages) are served by the same server; a
    command line that is not ours runs as it is."""
    r, pid = _served_pid(tmp_path, [sys.executable, "-m", "nesyseq.cli.main", "--help"])
    assert r.returncode == 0 and pid is not None and "usage" in r.stdout.lower()
    inner = (f"import subprocess, sys; r = subprocess.run([sys.executable, '-m', 'nesyseq.cli.main', '--help'], "
             f"capture_output=True); print(r.returncode)")
    r, pid = _served_pid(tmp_path, [sys.executable, "-c", inner])
    assert r.stdout.strip() == "0" and pid is not None   # the python -c ran plainly, its child was served
    r, pid = _served_pid(tmp_path, [sys.executable, "-c", "print('plain')"])
    assert r.stdout.strip() == "plain" and pid is None
    r, pid = _served_pid(tmp_path, [sys.executable, "-m", "nesyseq.cli.main", "--help"],
                         env=dict(os.environ, NESYSEQ_TEST_FORKSERVER="0"))
    assert r.returncode == 0 and pid is None
    import torch

    if torch.version.cuda is None:   # the server imported triton (with torch._dynamo) in this session's mode
        flipped = "0" if forkserver._interpret(os.environ) else "1"
        r, pid = _served_pid(tmp_path, [sys.executable, "-m", "nesyseq.cli.main", "--help"],
                             env=dict(os.environ, TRITON_INTERPRET=flipped))
        assert r.returncode == 0 and "usage" in r.stdout.lower() and pid is None   # declined: ran plainly


@pytest.mark.skipif(os.environ.get("NESYSEQ_TEST_FORKSERVER") == "0", reason="fork server off")
def test_served_command_gets_argv_env_cwd_stdin_and_status(tmp_path):
    # the command runs as a served child
    r, pid = _served_pid(tmp_path, [sys.executable, "-m", "nesyseq.cli.main", "--help"])
    assert "usage" in r.stdout.lower() and r.returncode == 0 and pid is not None
    # an error: exit status 2 and nesyseq's one-line message on stderr
    env = dict(os.environ, PYTHONPATH=str(REPO))
    served = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "launch", "no_such_experiment", "--dry-run"],
                            capture_output=True, text=True, cwd=tmp_path, env=env)
    assert served.returncode == 2 and "no_such_experiment" in served.stderr, served
    # the working directory: fairseq-preprocess reads and writes paths relative to cwd; the
    # environment: LOGLEVEL=WARNING silences fairseq_cli's INFO lines (read at its import, in the
    # child), which a plain run prints to stdout
    (tmp_path / "train.txt").write_text("zebra yak zebra\n")
    argv = [str(BIN / "fairseq-preprocess"), "--only-source", "--trainpref", "train.txt", "--destdir", "bin",
            "--workers", "1"]
    run = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert "| INFO | fairseq_cli.preprocess |" in run.stdout  # logs on stdout, as a fresh process
    words = [ln.split()[0] for ln in (tmp_path / "bin" / "dict.txt").read_text().splitlines()]
    assert words[:2] == ["zebra", "yak"]  # then fairseq's padding to a multiple of 8
    quiet = subprocess.run(argv[:-4] + ["--destdir", "bin2", "--workers", "1"], capture_output=True, text=True,
                           cwd=tmp_path, env=dict(env, LOGLEVEL="WARNING"))
    assert quiet.returncode == 0 and "| INFO |" not in quiet.stdout + quiet.stderr


@pytest.mark.skipif(os.environ.get("NESYSEQ_TEST_FORKSERVER") == "0", reason="fork server off")
def test_killing_the_process_kills_the_forked_command(tmp_path):
    """subprocess.run(timeout=...) kills the process it started (the shim); the forked command
    must die with it, not train on in the background."""
    import time

    (tmp_path / "train.txt").write_text("a b c d\n" * 50)
    subprocess.run([str(BIN / "fairseq-preprocess"), "--only-source", "--trainpref", "train.txt",
                    "--validpref", "train.txt", "--destdir", "bin", "--workers", "1"], cwd=tmp_path, check=True,
                   capture_output=True)
    save = tmp_path / "marker_ck"
    p = subprocess.Popen([str(BIN / "fairseq-train"), str(tmp_path / "bin"), "--task", "language_modeling",
                          "--arch", "transformer_lm", "--decoder-layers", "1", "--decoder-embed-dim", "8",
                          "--decoder-ffn-embed-dim", "8", "--decoder-attention-heads", "1", "--optimizer", "adam",
                          "--lr", "1e-3", "--max-tokens", "64", "--tokens-per-sample", "16", "--max-update",
                          "10000000", "--save-dir", str(save), "--no-save", "--cpu", "--num-workers", "0"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
                         env=dict(os.environ, NESYSEQ_FORKSERVER_PIDFILE=str(tmp_path / "pid")))
    with pytest.raises(subprocess.TimeoutExpired):
        p.wait(timeout=4)
    p.kill()
    p.wait()
    pid = int((tmp_path / "pid").read_text())

    def alive():
        try:
            return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return False

    for _ in range(50):
        if not alive():
            break
        time.sleep(0.1)
    else:
        pytest.fail("the forked fairseq-train outlived its killed shim")


@pytest.mark.skipif(os.environ.get("NESYSEQ_TEST_FORKSERVER") == "0", reason="fork server off")
def test_a_daemonic_child_does_not_keep_the_output_open(tmp_path):
    """A command's daemonic multiprocessing child (a DataLoader worker) ends with the command,
    as at a normal interpreter exit, so a caller reading the command's output to its end returns
    when the command does.  The child here would sleep 120 s holding stdout; a served command
    that left it running would hit the 60-s timeout."""
    plugin = tmp_path / "sleeper_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text(
        "import multiprocessing, time\n"
        "multiprocessing.Process(target=time.sleep, args=(120,), daemon=True).start()\n")
    r, pid = _served_pid(tmp_path, [str(BIN / "fairseq-preprocess"), "--user-dir", str(plugin), "--help"],
                         timeout=60, cwd=tmp_path)
    assert r.returncode == 0 and "usage" in r.stdout.lower() and pid is not None, r.stderr[-2000:]
