"""Where a FOLNet training step spends its time: GEMM vs everything else, ours and official.

Profiles one masked-LM forward+backward step (the same step and batch as ``bench_folnet.py``)
of our ``folnet`` and, with ``--official-repo``, of the authors' model, with
``torch.profiler``, and splits the self CPU time of each into the GEMM family
(mm / addmm / bmm / baddbmm / addbmm / matmul kernels / linear / einsum's bmm) and the rest.
It then prints the bound on the speed target (ours >= 1.5x faster than the official code) that
this implies: if every non-GEMM operator of ours were free and the GEMMs ran as they do now, ours
would be at most
``official_total / ours_gemm`` times faster than the official code.

    OMP_NUM_THREADS=1 python benchmarks/profile_folnet_floor.py --official-repo /tmp/folnet_official
"""
import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import Stopwatch  # noqa: E402
from benchmarks.bench_folnet import build_folnet, build_official, dictionary, make_batch  # noqa: E402

GEMM = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::_addmm_activation",
        "aten::mkldnn_linear", "aten::_mkl_linear", "aten::mkldnn_matmul")


def one_step(model, batch):
    x, masked, target = batch
    model.zero_grad(set_to_none=True)
    logits, _ = model(x, masked_tokens=masked)
    F.cross_entropy(logits.float(), target).backward()


def profile(model, batch, repeats):
    one_step(model, batch)                      # warm-up
    best = None
    for _ in range(repeats):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            with Stopwatch() as sw:
                one_step(model, batch)
            wall = sw.wall
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events) / 1e6
        gemm = sum(e.self_cpu_time_total for e in events if e.key in GEMM) / 1e6
        top = sorted(((e.self_cpu_time_total / 1e6, e.key) for e in events if e.key not in GEMM), reverse=True)[:8]
        if best is None or total < best["total"]:
            best = {"wall": wall, "total": total, "gemm": gemm, "top": top}
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--official-repo", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    d = dictionary()
    dev = torch.device("cpu")
    batch = make_batch(d, a.batch, a.length, dev)
    models = {"ours": build_folnet(d, a.layers, "jmc.atp", dev)[0]}
    if a.official_repo:
        models["official"] = build_official(a.official_repo, d, a.layers, "jmc.atp", dev)
    res = {}
    for name, m in models.items():
        m.train()
        res[name] = profile(m, batch, a.repeats)
    print(f"{a.layers} layers, T={a.length}, batch {a.batch}, {torch.get_num_threads()} thread(s), "
          f"self CPU time under the profiler (best of {a.repeats})")
    print("| model | total (s) | GEMM (s) | GEMM share | rest (s) |")
    print("|---|---|---|---|---|")
    for name, r in res.items():
        print(f"| {name} | {r['total']:.3f} | {r['gemm']:.3f} | {100 * r['gemm'] / r['total']:.0f}% | "
              f"{r['total'] - r['gemm']:.3f} |")
    for name, r in res.items():
        print(f"\n{name}: largest non-GEMM self times: "
              + ", ".join(f"{k} {t:.3f}s" for t, k in r["top"]))
    if "official" in res:
        o, u = res["official"], res["ours"]
        print(f"\nofficial / ours (total): {o['total'] / u['total']:.2f}x")
        print(f"bound if all of ours' non-GEMM time were free: official / ours_GEMM = {o['total'] / u['gemm']:.2f}x")
        need = o["total"] / 1.5
        print(f"for 1.5x, ours must take <= {need:.3f} s: its non-GEMM time would have to fall from "
              f"{u['total'] - u['gemm']:.3f} s to {max(0.0, need - u['gemm']):.3f} s")


if __name__ == "__main__":
    main()
