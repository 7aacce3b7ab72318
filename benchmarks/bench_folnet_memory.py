"""Activation memory of one FOLNet layer: ours vs the authors' code vs RoBERTa-base, and CPU step time.

Saved-bytes table: one forward pass of one layer under
``torch.autograd.graph.saved_tensors_hooks``; the bytes of the distinct storages
autograd keeps for backward, parameters left out (``evaluations/folnet_memory.py``).
Rows: the official FOLNet layer (``ReasonerLayer`` of tencent-ailab/FOLNet
``folnet.py``, FOLNet-base config, join/mu/cjoin + assoc/prod/trans, imported from
``--official-repo``, never copied here), ours (``folnet_base`` widths, ``jmc.atp``)
with the lean backward (the default) and with it off (``FolnetLayer.lean = False``,
the plain autograd path), and one fairseq RoBERTa-base encoder layer.  Shapes:
T=128, B=8 and T=512, B=2 (``--small``: T=32, B=2 and T=64, B=1).

``--where``: what ours keeps, by the line that asked autograd to keep it, in
units of one binary tensor (B·T·T·D2 floats).

``--time``: CPU training step (masked-LM forward + backward of the whole model) of
ours with the lean backward against the same model with it off, in this process,
alternating the two; the medians of the per-pair ratios of process CPU time and of
wall time (on a shared machine the CPU time, one thread, is the steadier).

    python benchmarks/bench_folnet_memory.py --official-repo DIR [--where] [--time]
    TRITON_INTERPRET=1 python benchmarks/bench_folnet_memory.py --trans-impl triton --small
        # the Triton kernels for trans (run by the interpreter on the CPU)
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_folnet import build_folnet, build_transformer, dictionary, make_batch  # noqa: E402
from nesyseq.plugins.layers.folnet_layer import FolnetLayer  # noqa: E402
from nesyseq.evaluations import folnet_memory as fm  # noqa: E402

MiB = 2 ** 20


def roberta_layer_bytes(T, B):
    model = build_transformer(dictionary(), 1, torch.device("cpu")).train()
    layer = model.encoder.sentence_encoder.layers[0]
    x = torch.randn(T, B, fm.D1, generator=torch.Generator().manual_seed(0)).requires_grad_()
    return fm.saved_bytes(layer, lambda: layer(x, None)).total


def set_lean(model, lean):
    for m in model.modules():
        if isinstance(m, FolnetLayer):
            m.lean = lean


def step(model, batch):
    """(wall seconds, process CPU seconds) of one training step."""
    x, masked, target = batch
    model.zero_grad(set_to_none=True)
    t0, c0 = time.perf_counter(), time.process_time()
    logits, _ = model(x, masked_tokens=masked)
    F.cross_entropy(logits.float(), target).backward()
    return time.perf_counter() - t0, time.process_time() - c0


def time_steps(layers, T, B, repeats, dropout):
    """Per alternating pair, lean/plain of wall time and of process CPU time; one model.
    On a loaded machine the CPU time (one thread) is the steadier of the two."""
    d = dictionary()
    model, _ = build_folnet(d, layers, "jmc.atp", torch.device("cpu"))
    for m in model.modules():
        if isinstance(m, FolnetLayer):
            m.dropout = dropout
    model.train()
    batch = make_batch(d, B, T, torch.device("cpu"))
    for lean in (True, False):  # warm-up
        set_lean(model, lean)
        step(model, batch)
    walls, cpus, lean_t, plain_t = [], [], [], []
    for r in range(repeats):
        order = (True, False) if r % 2 == 0 else (False, True)
        t = {}
        for lean in order:
            set_lean(model, lean)
            t[lean] = step(model, batch)
        walls.append(t[True][0] / t[False][0])
        cpus.append(t[True][1] / t[False][1])
        lean_t.append(t[True][1])
        plain_t.append(t[False][1])
    return walls, cpus, statistics.median(lean_t), statistics.median(plain_t)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--official-repo", default=None, help="checkout of tencent-ailab/FOLNet (adds the official row)")
    p.add_argument("--small", action="store_true", help="T=32, B=2 and T=64, B=1 (quick)")
    p.add_argument("--shapes", default=None, help="TxB list, e.g. 128x8,512x2 (default: the issue's two)")
    p.add_argument("--dropout", type=float, default=0.0, help="dropout of both FOLNets (default 0, as bench_folnet)")
    p.add_argument("--trans-impl", default="auto", choices=["auto", "triton", "torch", "eager"])
    p.add_argument("--where", action="store_true", help="what ours keeps, by source line, at the first shape")
    p.add_argument("--time", action="store_true", help="CPU step time, lean vs plain, same process")
    p.add_argument("--time-shape", default="128x8", help="TxB of --time")
    p.add_argument("--time-layers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5, help="alternating pairs for --time")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    shapes = a.shapes or ("32x2,64x1" if a.small else "128x8,512x2")
    shapes = [tuple(int(v) for v in s.split("x")) for s in shapes.split(",")]
    print(f"# torch {torch.__version__}, CPU ({torch.get_num_threads()} threads), fp32, dropout {a.dropout}, "
          f"trans impl {a.trans_impl}; kept for backward per layer (MiB), parameters left out")
    print("| T | B | binary tensor (MiB) | official | ours | ours/official | ours, lean off | lean off/official "
          "| RoBERTa-base | ours/RoBERTa |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ours = fm.ours_layer(a.dropout, True, trans_impl=a.trans_impl)
    official = fm.official_layer(a.official_repo, a.dropout) if a.official_repo else None
    for T, B in shapes:
        unit = B * T * T * fm.D2 * 4 / MiB
        ours.lean = True
        lean = fm.count_layer("ours", T, B, layer=ours).total / MiB
        ours.lean = False
        plain = fm.count_layer("plain", T, B, layer=ours).total / MiB
        off = fm.count_layer("official", T, B, layer=official).total / MiB if official is not None else None
        rob = roberta_layer_bytes(T, B) / MiB
        o = f"{off:.0f} | {lean / off:.2f}" if off else "- | -"
        o2 = f"{plain / off:.2f}" if off else "-"
        print(f"| {T} | {B} | {unit:.0f} | {o.split(' | ')[0]} | {lean:.0f} | {o.split(' | ')[1]} | {plain:.0f} | {o2} "
              f"| {rob:.0f} | {lean / rob:.1f} |", flush=True)
    if a.where:
        T, B = shapes[0]
        unit = B * T * T * fm.D2 * 4
        for lean in (True, False):
            ours.lean = lean
            s = fm.count_layer("ours", T, B, layer=ours, roots=(str(ROOT / "plugins"), str(ROOT / "triton_kernels")))
            print(f"\n# ours, lean {'on' if lean else 'off'}, T={T}, B={B}: {s.total / unit:.2f} binary tensors "
                  f"({s.total / MiB:.0f} MiB); by the line that kept them (binary tensors)")
            for site, n in sorted(s.where.items(), key=lambda kv: -kv[1]):
                if n >= 0.01 * unit:
                    print(f"  {n / unit:5.2f}  {site}")
    if a.time:
        T, B = (int(v) for v in a.time_shape.split("x"))
        walls, cpus, tl, tp = time_steps(a.time_layers, T, B, a.repeats, a.dropout)
        print(f"\n# CPU training step, folnet_base widths, L={a.time_layers}, T={T}, B={B}, {a.threads} threads: "
              f"CPU time lean {tl:.2f} s, lean off {tp:.2f} s (medians)\n"
              f"#   lean/off CPU time per pair {', '.join(f'{r:.3f}' for r in cpus)}; "
              f"median **{statistics.median(cpus):.3f}**\n"
              f"#   lean/off wall time per pair {', '.join(f'{r:.3f}' for r in walls)}; "
              f"median {statistics.median(walls):.3f}")


if __name__ == "__main__":
    main()
