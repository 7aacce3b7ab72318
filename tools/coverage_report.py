#!/usr/bin/env python3
"""``make coverage``: the product lines the CPU suite never executes, per folder.

    python tools/coverage_report.py run      # the suite under coverage.py, then the report
    python tools/coverage_report.py report   # the report of the last run (.coverage)

``run`` runs ``pytest -n 2 --dist loadgroup tests`` under coverage.py with the measurement
carried into the xdist workers, the test fork server and its forked children, and every Python
subprocess (coverage's ``patch = subprocess, fork, _exit``), then combines the data files.
The report lists, per product folder, the statements and the ones never executed, and then
every never-executed line that names a device (tools/gpu_only.py's DEVICE_LINE) and is not in
the GPU-only list: those are device branches no CPU test drives, and the command exits 1 when
there is one.  ``--lines`` prints every never-executed line.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import gpu_only  # noqa: E402

PRODUCT = ["plugins", "user_dir", "data_prep", "triton_kernels", "slurm", "evaluations", "nesyseq", "hydra_plugins"]
DATA = REPO / ".coverage"
RC = """[run]
data_file = {data}
parallel = true
patch = subprocess, fork, _exit
source = {source}
omit = */_trans_kernels.py
[report]
exclude_lines =
    pragma: no cover
    if __name__ == .__main__.:
"""
# _trans_kernels.py holds @triton.jit kernels: the interpreter runs them, but as Triton's own
# traced copies, which coverage.py cannot attribute to the file's lines


def write_rc(tmp: Path) -> Path:
    rc = tmp / "coveragerc"
    rc.write_text(RC.format(data=DATA, source=", ".join(str(REPO / p) for p in PRODUCT)))
    return rc


def run_suite(python: str) -> int:
    for old in REPO.glob(".coverage*"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        rc = write_rc(Path(tmp))
        cmd = [python, "-m", "coverage", "run", "--rcfile", str(rc), "-m", "pytest", "-q", "-n", "2",
               "--dist", "loadgroup", "-p", "no:cacheprovider", "tests"]
        code = subprocess.call(cmd, cwd=str(REPO))
        subprocess.check_call([python, "-m", "coverage", "combine", "--rcfile", str(rc), "-q"], cwd=str(REPO))
    return code


def rel(path: str) -> str:
    return os.path.relpath(path, REPO)


def analyse():
    """{folder: (statements, missing)}, and the never-executed device lines outside the list."""
    import coverage

    cov = coverage.Coverage(data_file=str(DATA))
    cov.load()
    folders = defaultdict(lambda: [0, 0])
    missing_lines, device_lines = {}, []
    for f in sorted(cov.get_data().measured_files()):
        r = rel(f)
        if r.startswith("..") or not Path(f).is_file():
            continue
        _, statements, _, missing, _ = cov.analysis2(f)
        top = r.split(os.sep)[0]
        sub = os.sep.join(r.split(os.sep)[:2]) if top == "plugins" and r.count(os.sep) > 1 else top
        folders[sub][0] += len(statements)
        folders[sub][1] += len(missing)
        missing_lines[r] = missing
        text = Path(f).read_text(encoding="utf-8").splitlines()
        for n in missing:
            line = text[n - 1]
            if gpu_only.DEVICE_LINE.search(line) and not gpu_only.entry_for(r, line) \
                    and not line.strip().startswith("#"):
                device_lines.append(f"{r}:{n}: {line.strip()}")
    return folders, missing_lines, device_lines


def report(show_lines: bool) -> int:
    if not DATA.is_file():
        print(f"{DATA}: no coverage data (run: make coverage)", file=sys.stderr)
        return 2
    folders, missing_lines, device_lines = analyse()
    total_s = sum(s for s, _ in folders.values())
    total_m = sum(m for _, m in folders.values())
    print(f"{'folder':<24} {'statements':>10} {'never run':>10} {'executed':>9}")
    for name in sorted(folders):
        s, m = folders[name]
        print(f"{name:<24} {s:>10} {m:>10} {100 * (s - m) / max(s, 1):>8.1f}%")
    print(f"{'all':<24} {total_s:>10} {total_m:>10} {100 * (total_s - total_m) / max(total_s, 1):>8.1f}%")
    if show_lines:
        for r, missing in sorted(missing_lines.items()):
            if missing:
                print(f"{r}: {', '.join(map(str, missing))}")
    print(f"GPU-only list (tools/gpu_only.py): {len(gpu_only.GPU_ONLY)} entries")
    if device_lines:
        print(f"{len(device_lines)} device-dependent lines the CPU suite never runs, not in the GPU-only list:")
        for d in device_lines:
            print("  " + d)
        return 1
    print("every device-dependent line outside the GPU-only list runs in the CPU suite")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("what", choices=["run", "report"])
    ap.add_argument("--lines", action="store_true", help="print every never-executed line, per file")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    if args.what == "run":
        code = run_suite(args.python)
        if code not in (0, 1):
            print(f"coverage: pytest exited {code}", file=sys.stderr)
        if code == 1:
            print("coverage: some tests failed; the figures below count what ran", file=sys.stderr)
    return report(args.lines)


if __name__ == "__main__":
    sys.exit(main())
