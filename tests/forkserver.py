"""A fork server for the suite's CLI runs: torch and fairseq imported once, each run forked.

Every end-to-end test starts fairseq's or nesyseq's command line in a new Python process, and
most of such a process's CPU time on the 2-core CI machine is importing torch and fairseq
(about 7 s of CPU here, of a tiny training run's 8-12 s).  Here one process per pytest worker
(the *server*) imports them, and every Python process of the run's process tree whose command
line is ``python -m fairseq_cli.*`` / ``-m nesyseq.cli.main`` or one of the venv's
``fairseq-*`` / ``nesyseq`` scripts becomes a *shim* at interpreter start: the venv's
``nesyseq-test-forkserver.pth`` (written by ``make venv``) runs :func:`startup` when
``NESYSEQ_TEST_FORKSERVER_SOCK`` is set, which hands the process's argv, environment, working
directory and stdin/stdout/stderr to the server and waits.  The server forks a child to run the
command and reports its exit status, which the shim exits with.  That covers the commands a test
starts, the stages a launcher starts (submitit's local executor, the SLURM jobs of the local
cluster) and theirs, because each inherits the variable.  To the caller nothing changes: it
still gets a process with the command's output, exit status, signals, timeout and kill.

What the child does not share with a fresh interpreter:
  * torch, fairseq and (on a CPU build of torch) torch._dynamo, which brings triton, are already
    imported, with the server's environment.  Our own code is not: ``plugins`` (via
    ``--user-dir`` or ``PYTHONPATH``) and the rest are imported by the child, so ``user_dir``'s
    registrations behave as in a fresh process.  The server refuses to start if importing them
    pulled in any of our modules, and declines a command whose ``TRITON_INTERPRET`` differs from
    the one triton was imported with (that command then runs as a plain process).
  * ``OMP_NUM_THREADS`` is applied with ``torch.set_num_threads`` (torch read it at import).
Other command lines (``python -c``, scripts, pytest in a subprocess) run as they are.
``NESYSEQ_TEST_FORKSERVER=0`` turns the whole mechanism off.
"""
import array
import json
import os
import signal
import socket
import struct
import sys

INTERCEPT_MODULES = ("fairseq_cli.train", "fairseq_cli.generate", "fairseq_cli.preprocess",
                     "fairseq_cli.eval_lm", "fairseq_cli.hydra_train", "nesyseq.cli.main")
INTERCEPT_SCRIPTS = ("fairseq-train", "fairseq-generate", "fairseq-preprocess", "fairseq-eval-lm",
                     "fairseq-hydra-train", "nesyseq")
SOCK_ENV = "NESYSEQ_TEST_FORKSERVER_SOCK"
OURS = ("nesyseq", "plugins", "user_dir", "triton_kernels", "data_prep", "evaluations", "slurm")


def _send(conn, obj, fds=()):
    data = json.dumps(obj).encode()
    msg = struct.pack("!I", len(data)) + data
    if fds:
        conn.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        conn.sendall(msg)


def _recv(conn, nfds=0):
    fds = array.array("i")
    head, anc, _, _ = conn.recvmsg(4, socket.CMSG_LEN(nfds * fds.itemsize) if nfds else 0)
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if len(head) < 4:
        return None, list(fds)
    (n,) = struct.unpack("!I", head)
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return json.loads(buf), list(fds)


# ----------------------------------------------------------------------------- shim (client)

def shim(sock, mode, argv, unbuffered=False):
    """Run ``argv`` in a child of the server at ``sock`` and exit with its status; returns
    (and the process goes on as a plain one) when the server declines it."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock)
    _send(conn, {"mode": mode, "argv": argv, "env": dict(os.environ), "cwd": os.getcwd(),
                 "unbuffered": unbuffered}, fds=(0, 1, 2))
    msg, _ = _recv(conn)
    if msg is None or "pid" not in msg:   # the server does not run it (see serve): run as usual
        conn.close()
        return
    pid = msg["pid"]

    def forward(sig, _frame):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
        signal.signal(sig, forward)
    msg, _ = _recv(conn)  # the child's exit status; EOF if it died without reporting
    code = msg["status"] if msg else 1
    os._exit(code if code >= 0 else 128 - code)


# ----------------------------------------------------------------------------- server

def _run_child(conn, req, fds):
    """In the forked child: become the requested command."""
    os.setpgid(0, 0)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    import threading

    def watch_shim():  # the shim was killed (a test's timeout): stop, as a real process would be
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch_shim, daemon=True).start()
    if req["env"].get("NESYSEQ_FORKSERVER_PIDFILE"):  # for tests/test_forkserver.py
        with open(req["env"]["NESYSEQ_FORKSERVER_PIDFILE"], "w") as f:
            f.write(str(os.getpid()))
    status = 1
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        argv = req["argv"]
        extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        base = [p for p in sys.path if p and p not in _SERVER_PYTHONPATH]
        import torch

        if req["env"].get("OMP_NUM_THREADS", "").isdigit():
            torch.set_num_threads(int(req["env"]["OMP_NUM_THREADS"]))
        if req.get("unbuffered"):   # python -u
            sys.stdout.reconfigure(write_through=True)
            sys.stderr.reconfigure(write_through=True)
        import runpy

        entry = argv[2] if req["mode"] == "module" else os.path.basename(argv[0])
        if not (entry.startswith("fairseq_cli") or entry.startswith("fairseq-")):
            import logging

            logging.getLogger().handlers[:] = _AFTER_FAIRSEQ[0]
            logging.getLogger().setLevel(_AFTER_FAIRSEQ[1])

        if req["mode"] == "module":
            sys.path[:] = [os.getcwd()] + extra + base
            sys.argv = [argv[2]] + argv[3:]
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        else:
            sys.path[:] = [os.path.dirname(os.path.abspath(argv[0]))] + extra + base
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
        status = 0
    except SystemExit as e:
        code = e.code
        status = 0 if code is None else (code if isinstance(code, int) else 1)
        if not isinstance(code, int) and code is not None:
            print(code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        _end_children()
        try:
            _send(conn, {"status": status})
        except OSError:
            pass
        os._exit(status)


def _end_children():
    """What a normal interpreter exit does for multiprocessing's children (its exit handler):
    terminate the daemonic ones, join the rest.  The child leaves with os._exit (the server's
    own exit handlers are not the command's), which skips that; a DataLoader worker (daemonic,
    fairseq's --num-workers) would then hold the command's stdout open until it notices its
    parent is gone, about 5 s later, and a caller reading that pipe to its end waits as long."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return
    try:
        children = mp.active_children()
        for p in children:
            if p.daemon:
                p.terminate()
        for p in children:
            p.join()
    except Exception:
        pass


_SERVER_PYTHONPATH = set()
_AFTER_FAIRSEQ = []
_TRITON_MODE = []     # [TRITON_INTERPRET's truth when the server imported triton], or [] if it did not


def _interpret(env) -> bool:
    # triton_kernels.trans_triton.interpreting()'s test, on a given environment: the server may not
    # import our packages, so it cannot call that one
    return env.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def serve(path):
    _SERVER_PYTHONPATH.update(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    import logging

    import torch  # noqa: F401
    import fairseq  # noqa: F401
    import fairseq.options  # noqa: F401
    import fairseq.sequence_generator  # noqa: F401

    # Logging as a fresh process would have it.  Importing fairseq configures the root logger
    # (fairseq/tasks/text_to_speech.py calls logging.basicConfig); fairseq_cli.* (not imported
    # here) call basicConfig(stream=sys.stdout) *before* they import fairseq, so their logs go
    # to stdout.  A fairseq_cli child therefore starts from a bare root logger; any other child
    # (nesyseq, which imports fairseq before logging anything) gets the state fairseq's import left.
    root = logging.getLogger()
    _AFTER_FAIRSEQ[:] = [root.handlers[:], root.level]
    root.handlers.clear()
    root.setLevel(logging.WARNING)

    # torch.optim's first Optimizer imports torch._dynamo (about 2.5 s of every training run's
    # CPU here), which imports triton.  Triton fixes the interpreter mode of its own library
    # when it is imported, so the server serves only commands whose TRITON_INTERPRET says the
    # same as its own (the others run as plain processes).  Only on a CPU build of torch: on
    # a CUDA build the import could touch the driver before the fork.
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        import torch._dynamo  # noqa: F401
    _TRITON_MODE[:] = [_interpret(os.environ)] if "triton" in sys.modules else []

    leaked = sorted(m for m in sys.modules if m.split(".")[0] in OURS)
    if leaked:
        sys.exit(f"forkserver: importing torch/fairseq imported {leaked[:5]}; refusing to serve")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    print("ready", flush=True)
    while True:
        try:
            conn, _ = srv.accept()
        except InterruptedError:
            continue
        req, fds = _recv(conn, nfds=3)
        if req is None or len(fds) != 3 or (_TRITON_MODE and _interpret(req["env"]) != _TRITON_MODE[0]):
            try:
                _send(conn, {"plain": True})
            except OSError:
                pass
            for fd in fds:
                os.close(fd)
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            srv.close()
            _send(conn, {"pid": os.getpid()})
            _run_child(conn, req, fds)
        for fd in fds:
            os.close(fd)
        conn.close()


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# ----------------------------------------------------------------------------- interception

PLAIN_FLAGS = ("-u", "-B")    # interpreter flags a served command may carry (-u: the child writes through)


def served_command(orig_argv, python=sys.executable):
    """``(mode, argv, unbuffered)`` for an interpreter command line the server runs, else None.
    ``orig_argv`` is the whole command line, as ``sys.orig_argv`` gives it."""
    if not isinstance(orig_argv, (list, tuple)) or len(orig_argv) < 2:
        return None
    args = [os.fspath(a) for a in orig_argv]
    exe, rest = args[0], args[1:]
    flags = []
    while rest and rest[0] in PLAIN_FLAGS:
        flags.append(rest.pop(0))
    unbuffered = "-u" in flags
    if len(rest) >= 2 and rest[0] == "-m" and rest[1] in INTERCEPT_MODULES:
        return "module", [exe, "-m", *rest[1:]], unbuffered
    bindir = os.path.dirname(os.path.abspath(python))
    if rest and os.path.basename(rest[0]) in INTERCEPT_SCRIPTS and \
            os.path.dirname(os.path.abspath(rest[0])) == bindir:
        return "script", rest, unbuffered
    return None


def startup():
    """At interpreter start (the venv's ``nesyseq-test-forkserver.pth``): with a server's socket
    in ``NESYSEQ_TEST_FORKSERVER_SOCK``, a served command line becomes a shim; anything else
    goes on as usual."""
    sock = os.environ.get(SOCK_ENV)
    if not sock or os.environ.get("NESYSEQ_TEST_FORKSERVER") == "0" or not os.path.exists(sock):
        return
    cmd = served_command(getattr(sys, "orig_argv", None))
    if cmd is not None:
        shim(sock, *cmd)


if __name__ == "nesyseq_forkserver_startup":
    startup()
elif __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    serve(sys.argv[2])
