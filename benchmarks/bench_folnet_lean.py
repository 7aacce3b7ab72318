"""FOLNet's lean training path on the lane's device: mixed precision against fp32, and its cost.

Two parts, one process, one model (``folnet_base`` widths, ops ``jmc.atp``, ``--layers`` deep) and
one masked-LM batch:

1. precision: one training step (forward, loss, backward) on the lean path (the default) in fp32,
   under autocast bf16, and under autocast fp16 with a loss scale of 128 (fairseq's
   --fp16-init-scale); the loss's and the gradient's relative error against fp32, and the worst
   parameter tensor's (tests/test_precision_cpu.py's measures, at a real width).
2. lean vs plain: the same step with every layer's ``lean`` on and off (off keeps every
   intermediate: the plain autograd path), timed alternately, best of ``--repeats``; and the peak
   memory of one step (CUDA: the allocator's peak; CPU: the bytes autograd saves).  The lean
   path runs the binary bool as a host-side loop over blocks of rows, so on a GPU its step time
   is the figure to watch.

    python benchmarks/bench_folnet_lean.py                      # CUDA when present
    python benchmarks/bench_folnet_lean.py --device cpu --quick # what the suite runs

Prints a Markdown table (and writes it with --markdown).
"""
import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nesyseq import plugins  # noqa: E402,F401
from fairseq.data import Dictionary  # noqa: E402
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY  # noqa: E402
from nesyseq.evaluations.folnet_memory import SavedBytes  # noqa: E402


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def build(layers: int, quick: bool, device: str):
    d = Dictionary()
    for i in range(1000):
        d.add_symbol(f"w{i}")
    args = argparse.Namespace(arch="folnet_base", folnet_layers=layers, dropout=0.0)
    if quick:  # tiny widths: the CPU suite runs every line of this script
        args = argparse.Namespace(arch="folnet_tiny", folnet_layers=layers, dropout=0.0)
    ARCH_CONFIG_REGISTRY[args.arch](args)
    cls = ARCH_MODEL_REGISTRY[args.arch]
    model = cls.build_model(cls.__dataclass.from_namespace(args), _Task(d)).to(device).train()
    return model, d


def set_lean(model, lean: bool) -> None:
    for m in model.modules():
        if hasattr(m, "lean") and isinstance(m.lean, bool):
            m.lean = lean


def batch(d, B: int, T: int, device: str):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(d.nspecial, len(d), (B, T), generator=g)
    x[:, 0] = d.bos()
    masked = torch.rand(B, T, generator=g) < 0.15
    masked[:, 1] = True
    return x.to(device), masked.to(device), x[masked.cpu()].to(device)


def step(model, x, masked, target, dtype=None, scale: float = 1.0):
    """One MLM training step; returns the loss and {name: gradient} in fp32 (unscaled)."""
    model.zero_grad(set_to_none=True)
    dev = x.device.type
    with torch.autocast(dev, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        logits, _ = model(x, masked_tokens=masked)
        loss = F.cross_entropy(logits.float(), target)
    (loss * scale).backward()
    grads = {n: (p.grad.float() / scale if p.grad is not None else torch.zeros_like(p, dtype=torch.float32))
             for n, p in model.named_parameters() if p.requires_grad}
    return float(loss.detach()), grads


def errors(ref, got, ref_loss, loss):
    total = torch.cat([g.flatten() for g in ref.values()]).norm()
    diff = torch.cat([(got[n] - ref[n]).flatten() for n in ref]).norm()
    per = {n: float((got[n] - ref[n]).norm() / max(float(ref[n].norm()), 1e-4 * float(total))) for n in ref}
    worst = max(per, key=per.get)
    finite = all(bool(torch.isfinite(g).all()) for g in got.values())
    return abs(loss - ref_loss) / abs(ref_loss), float(diff / total), per[worst], worst, finite


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()  # CUDA only: a stream sync before reading the clock


def peak_memory(model, x, masked, target, device: str, dtype) -> float:
    """MiB: the allocator's peak over one step on CUDA; on the CPU the bytes autograd saves."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(model, x, masked, target, dtype)
        sync(device)
        return (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    saved = SavedBytes(model.parameters())
    with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
        step(model, x, masked, target, dtype)
    return saved.total / 2 ** 20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--T", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="folnet_tiny widths, T 8, batch 2, 1 repeat")
    ap.add_argument("--markdown", default="")
    args = ap.parse_args(argv)
    if args.quick:
        args.T, args.batch, args.repeats, args.layers = 8, 2, 1, 2
    dev = args.device
    torch.manual_seed(0)
    model, d = build(args.layers, args.quick, dev)
    x, masked, target = batch(d, args.batch, args.T, dev)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    lines = [f"FOLNet lean path, {'folnet_tiny' if args.quick else 'folnet_base'} widths x {args.layers} layers, "
             f"batch {args.batch} x T {args.T}, device {torch.cuda.get_device_name() if dev == 'cuda' else dev}, "
             f"torch {torch.__version__}", "",
             "| precision | loss | rel. loss error | rel. gradient error | worst tensor | finite |",
             "|---|---|---|---|---|---|"]
    set_lean(model, True)
    ref_loss, ref = step(model, x, masked, target)
    lines.append(f"| fp32 | {ref_loss:.5f} | — | — | — | yes |")
    ok = True
    for name, dt in dtypes.items():
        loss, got = step(model, x, masked, target, dt, scale=128.0 if name == "fp16" else 1.0)
        le, ge, te, worst, finite = errors(ref, got, ref_loss, loss)
        ok &= finite
        lines.append(f"| {name} autocast | {loss:.5f} | {le:.2e} | {ge:.2e} | {te:.2e} ({worst}) | "
                     f"{'yes' if finite else 'NO'} |")
    lines += ["", "| path | dtype | step ms (best of %d) | lean / plain | peak MiB | lean / plain |" % args.repeats,
              "|---|---|---|---|---|---|"]
    for name, dt in [("fp32", None)] + list(dtypes.items()):
        times = {True: float("inf"), False: float("inf")}
        for _ in range(args.repeats):
            for lean in (True, False):  # alternate, so drift hits both alike
                set_lean(model, lean)
                sync(dev)
                t0 = time.perf_counter()
                step(model, x, masked, target, dt)
                sync(dev)
                times[lean] = min(times[lean], time.perf_counter() - t0)
        mem = {}
        for lean in (True, False):
            set_lean(model, lean)
            mem[lean] = peak_memory(model, x, masked, target, dev, dt)
        for lean in (True, False):
            ratio_t = f"{times[True] / times[False]:.2f}" if lean else ""
            ratio_m = f"{mem[True] / mem[False]:.2f}" if lean else ""
            lines.append(f"| {'lean' if lean else 'plain'} | {name} | {1e3 * times[lean]:.1f} | {ratio_t} | "
                         f"{mem[lean]:.1f} | {ratio_m} |")
    set_lean(model, True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        from nesyseq.common.atomic import atomic_write_text
        atomic_write_text(args.markdown, text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
