"""Forward+backward throughput of TPRU vs LSTM vs GRU (``BiRecurrent``, bidirectional) at equal d on CPU.

All encoders are built in this process, run the same (T, B, d) batch (sum of outputs, backward), and
alternate so drift in the shared machine's speed hits all alike; the best (minimum) of the repeats is
reported as tokens/s and as ratios against the LSTM (torch's fused cuDNN-free CPU kernel) — wall time
and process CPU time.  TPRU runs fused (input projections for all steps in one matmul) and step by step.

    OMP_NUM_THREADS=1 python benchmarks/bench_tpru.py                 # d=64, T=32, B=64, N in {8,128,512}
    python benchmarks/bench_tpru.py --d 128 --T 64 --roles 8,32 --repeats 5
"""
import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nesyseq.plugins.layers.tpru import BiRecurrent, recurrent_param_count  # noqa: E402


def step_time(enc, x, mask):
    t0, c0 = time.perf_counter(), time.process_time()
    out, _ = enc(x, mask)
    out.sum().backward()
    return time.perf_counter() - t0, time.process_time() - c0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=64, help="state size d = input size")
    p.add_argument("--T", type=int, default=32, help="sequence length")
    p.add_argument("--B", type=int, default=64, help="batch size")
    p.add_argument("--roles", default="8,128,512", help="TPRU N values")
    p.add_argument("--repeats", type=int, default=5, help="best of this many")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    encs = {"lstm": BiRecurrent("lstm", a.d, a.d), "gru": BiRecurrent("gru", a.d, a.d)}
    for n in (int(r) for r in a.roles.split(",")):
        encs[f"tpru N={n} fused"] = BiRecurrent("tpru", a.d, a.d, num_roles=n, fused=True)
        encs[f"tpru N={n} step"] = BiRecurrent("tpru", a.d, a.d, num_roles=n, fused=False)
    x = torch.randn(a.T, a.B, a.d)
    mask = torch.ones(a.T, a.B, dtype=torch.bool)
    best = {k: (float("inf"), float("inf")) for k in encs}
    for k, e in encs.items():
        step_time(e, x, mask)                                           # warm-up
    for _ in range(a.repeats):
        for k, e in encs.items():
            w, c = step_time(e, x, mask)
            best[k] = (min(best[k][0], w), min(best[k][1], c))
    ntok = a.T * a.B
    bw, bc = best["lstm"]
    print(f"d={a.d} T={a.T} B={a.B} threads={a.threads}, bidirectional, forward+backward, best of {a.repeats}")
    print(f"{'encoder':22s} {'rec.params':>10s} {'tok/s':>10s} {'speed vs LSTM (wall)':>21s} {'(cpu)':>7s}")
    for k, (w, c) in best.items():
        print(f"{k:22s} {recurrent_param_count(encs[k]):10d} {ntok / w:10.0f} {bw / w:21.2f} {bc / c:7.2f}")
    for k in best:
        if k.endswith("fused"):
            s = k.replace("fused", "step")
            print(f"{k}: fused / step-by-step speed-up {best[s][0] / best[k][0]:.2f} (wall)")


if __name__ == "__main__":
    main()
