"""When did a run leave the task-1 plateau?  Reads the `*_valid.txt` files of this folder
(fairseq's per-epoch valid lines) and prints, per run: the first epoch-end update count with a
valid loss below THRESHOLD bits (the plateau sits at 0.80-0.87 bits, a learnt model below 0.03),
the best valid loss and where, and the last update count logged.

    python plateau_exit.py [--threshold 0.5] FILE...
"""
import argparse
import re
import sys

LINE = re.compile(r"loss ([0-9.]+) .*num_updates (\d+)")


def summarise(path, threshold):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if "valid on" not in line:
                continue
            m = LINE.search(line)
            if m is None:
                sys.exit(f"{path}:{n}: no 'loss ... num_updates' in a valid line")
            rows.append((float(m.group(1)), int(m.group(2))))
    if not rows:
        sys.exit(f"{path}: no valid lines")
    exit_at = next((u for loss, u in rows if loss < threshold), None)
    best = min(rows)
    return exit_at, best, rows[-1][1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)
    print(f"{'run':28s} {'below ' + str(a.threshold):>10s} {'best':>7s} {'at':>7s} {'last':>7s}")
    for path in a.files:
        exit_at, (loss, at), last = summarise(path, a.threshold)
        name = path.rsplit("/", 1)[-1].removesuffix("_valid.txt")
        print(f"{name:28s} {exit_at if exit_at is not None else 'never':>10} {loss:7.3f} {at:7d} {last:7d}")


if __name__ == "__main__":
    main()
