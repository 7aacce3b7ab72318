"""Training-step cost of FOLNet (``folnet_base`` widths, ops ``jmc.atp``) vs a transformer.

The baseline is fairseq's RoBERTa encoder with the same D1 (768), depth and
heads (12), FFN 3072; both are built in this process with the same seed and
run the same masked-LM step (15% of the tokens predicted, cross-entropy,
backward) on the same batch, for T in {64, 128, 256, 512}.  Runs alternate
between the two models so that drift in the machine's speed hits both alike;
the best (minimum) step time over the repeats is reported, the least disturbed
by other jobs on a shared machine, with FOLNet/transformer ratios (wall time, and
process CPU time).  On CPU the default is one thread (``--threads``).

Memory: on CUDA, the peak allocated memory of a step; on CPU (no allocator
statistics), the bytes of tensors autograd saves for backward (unique
storages), which is what dominates a training step's peak.

Per-operator breakdown: best forward+backward time of each operator (and of the two
bool FFNs) of one FOLNet layer, run in isolation on layer-normed atoms of the
right shapes, at the largest T.

    python benchmarks/bench_folnet.py            # --quick: 2 layers, batch 1 (default on CPU)
    python benchmarks/bench_folnet.py --full     # the real folnet_base depth (12 layers)
    python benchmarks/bench_folnet.py --full --official-repo /tmp/folnet_official
        # + the authors' model (tencent-ailab/FOLNet folnet.py, imported from that checkout,
        #   never copied here) as a third column, same process, same batch, same MLM step
The target at T=128 (CPU, one thread, batch 2): ours >= 1.5x faster than the official code
and <= 3.6x RoBERTa; figures in docs/benchmarks.md.
"""
import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import Stopwatch, repeat  # noqa: E402

from nesyseq import plugins  # noqa: E402,F401
from fairseq.data import Dictionary  # noqa: E402
from fairseq.models import ARCH_CONFIG_REGISTRY  # noqa: E402
from fairseq.models.roberta import RobertaModel  # noqa: E402
from nesyseq.plugins.layers.folnet_masks import self_mask  # noqa: E402
from nesyseq.plugins.layers.folnet_ops import BINARY_MODULES, UNARY_MODULES, Trans  # noqa: E402
from nesyseq.plugins.layers.folnet_layer import BinaryBool, BoolFFN  # noqa: E402
from nesyseq.plugins.models.folnet import FolnetConfig, FolnetModel  # noqa: E402
from nesyseq.evaluations.folnet_memory import SavedBytes  # noqa: E402  (what autograd keeps, counted)


def dictionary(n=1000):
    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"w{i}")
    return d


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def build_folnet(d, layers, ops, device, trans_impl="auto"):
    args = argparse.Namespace(folnet_layers=layers, folnet_ops=ops, dropout=0.0, folnet_trans_impl=trans_impl)
    ARCH_CONFIG_REGISTRY["folnet_base"](args)
    cfg = FolnetConfig.from_namespace(args)
    torch.manual_seed(0)
    return FolnetModel.build_model(cfg, _Task(d)).to(device), cfg


def build_transformer(d, layers, device):
    args = argparse.Namespace(encoder_layers=layers, max_positions=1024, dropout=0.0, attention_dropout=0.0)
    ARCH_CONFIG_REGISTRY["roberta_base"](args)
    torch.manual_seed(0)
    return RobertaModel.build_model(args, _Task(d)).to(device)


OFFICIAL_NAMES = {"c": "cjoin", "j": "join", "m": "mu", "a": "assoc", "p": "prod", "t": "trans"}


def build_official(repo, d, layers, ops, device):
    """The official FOLNet (folnet_base widths) + its BERT MLM head, run like a fairseq MLM model."""
    sys.path.insert(0, str(Path(repo).resolve()))
    import folnet as official  # noqa: E402  (the authors' file from --official-repo)
    from config_folnet import FOLNetConfig  # noqa: E402

    left, right = ops.split(".")
    cfg = FOLNetConfig(
        hidden_act="gelu", hidden_dropout_prob=0.0, layer_norm_eps=1e-12, initializer_range=0.02,
        max_position_offset=64, absolute_position=False, relative_position=True, vocab_size=len(d),
        type_vocab_size=2, diag_link=False, num_layers=layers, boolean_type="mlp",
        mixer_ops={0: None, 1: tuple(OFFICIAL_NAMES[c] for c in left if c != "b"),
                   2: tuple(OFFICIAL_NAMES[c] for c in right)},
        predicate_dims=(0, 768, 64), intermediate_dims=(0, 3072, 256), num_heads=12, head_size=64,
        hidden_size=768)

    class OfficialMLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.folnet = official.FOLNet(cfg)
            self.head = official.BertLMPredictionHead(cfg)
            self.head.decoder.weight = self.folnet.encoder.word_embd.weight  # tied, as in the official pretraining

        def forward(self, x, masked_tokens=None):
            seq, _, _ = self.folnet(x)
            return self.head(seq[masked_tokens]), None

    torch.manual_seed(0)
    return OfficialMLM().to(device)


def make_batch(d, batch, T, device):
    g = torch.Generator().manual_seed(T)
    x = torch.randint(d.nspecial, len(d), (batch, T), generator=g)
    x[:, 0] = d.bos()
    masked = torch.rand(batch, T, generator=g) < 0.15
    masked[:, 1] = True
    return x.to(device), masked.to(device), x[masked.cpu()].to(device)


def step(model, batch, device, measure_memory=False):
    x, masked, target = batch
    model.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    saved = SavedBytes()
    with Stopwatch(device) as sw:
        if measure_memory and device.type != "cuda":
            with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
                logits, _ = model(x, masked_tokens=masked)
        else:
            logits, _ = model(x, masked_tokens=masked)
        loss = F.cross_entropy(logits.float(), target)
        loss.backward()
    dt, dc = sw.wall, sw.cpu
    mem = torch.cuda.max_memory_allocated() if device.type == "cuda" else saved.total
    return dt, dc, mem


def op_breakdown(cfg, T, batch, device, repeats, dtype=torch.float32):
    """fwd+bwd time of each operator of one layer, in isolation."""
    d1, d2, H = cfg.folnet_unary_dim, cfg.folnet_binary_dim, cfg.folnet_heads
    g = torch.Generator().manual_seed(1)
    u1n = torch.randn(batch, T, d1, generator=g).to(device, dtype).requires_grad_()
    u2n = torch.randn(batch, T, T, d2, generator=g).to(device, dtype).requires_grad_()
    mask = self_mask("none", torch.zeros(batch, T, dtype=torch.bool, device=device))
    ok = mask.pair_ok
    torch.manual_seed(0)
    ops = {ch: UNARY_MODULES[ch](d1, d2, H).to(device, dtype) for ch in "cjm"}
    ops.update({ch: BINARY_MODULES[ch](d1, d2, H).to(device, dtype) for ch in "ap"})
    ops["t"] = Trans(d1, d2, H, impl=str(cfg.folnet_trans_impl)).to(device, dtype)
    writer_t = torch.nn.Linear(d2, d2).to(device, dtype)
    dense = mask.dense  # as in the layer: an unpadded encoder batch on CPU skips the mask arithmetic
    calls = {
        "cjoin (c)": lambda: ops["c"](ops["c"].columns(u1n), u2n, ok, True, transpose=True, dense=dense),  # encoder
        "join (j)": lambda: ops["j"](u2n, ops["j"].columns(u1n), ok, dense=dense),
        "mu (m)": lambda: ops["m"](u2n, ok, dense=dense),
        "assoc (a)": lambda: ops["a"](u1n, ops["a"].columns(u1n)),
        "prod (p)": lambda: ops["p"](u1n, u2n, ok, dense=dense),
        "trans (t)": lambda: ops["t"](u2n, ops["t"].rows(u2n), mask.trans, writer=writer_t, dense=dense),
    }
    ffn1 = BoolFFN(d1, cfg.folnet_ffn_unary).to(device, dtype)
    ffn2 = BinaryBool(d2, cfg.folnet_ffn_binary).to(device, dtype)
    calls["bool FFN unary"] = lambda: ffn1(u1n)
    calls["bool FFN binary"] = lambda: ffn2(u2n, u2n.transpose(1, 2))  # (the layer also fuses its residual in)
    times = {}
    for name, fn in calls.items():
        def call(fn=fn):
            u1n.grad = u2n.grad = None
            fn().float().pow(2).mean().backward()
        times[name] = min(repeat(call, device, warmup=1, rep=repeats))   # the first call untimed
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help="12 layers (folnet_base depth) instead of --quick's 2")
    p.add_argument("--quick", action="store_true", help="2 layers, batch 1 (the default)")
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--lengths", default="64,128,256,512")
    p.add_argument("--repeats", type=int, default=2, help="timed steps per model and length (after 1 warm-up)")
    p.add_argument("--ops", default="jmc.atp")
    p.add_argument("--breakdown-length", type=int, default=None, help="T of the per-operator table (default: largest)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--official-repo", default=None,
                   help="checkout of tencent-ailab/FOLNet: adds the official model as a third column")
    p.add_argument("--trans-impl", default="auto", choices=["auto", "triton", "torch", "eager"],
                   help="FOLNet's --folnet-trans-impl (auto: the Triton kernels on CUDA)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"],
                   help="parameter and activation dtype of both models")
    p.add_argument("--tf32", action="store_true", help="fp32 matmuls (and the trans kernels) in TF32")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads (default 1: on a shared machine, multi-threaded times swing by 10x)")
    args = p.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    layers = args.layers or (12 if args.full else 2)
    device = torch.device(args.device)
    lengths = [int(t) for t in args.lengths.split(",")]
    d = dictionary()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    if args.tf32:
        torch.backends.cuda.matmul.fp32_precision = "tf32"
    folnet, cfg = build_folnet(d, layers, args.ops, device, args.trans_impl)
    trf = build_transformer(d, layers, device)
    off = build_official(args.official_repo, d, layers, args.ops, device) if args.official_repo else None
    folnet, trf = folnet.to(dtype), trf.to(dtype)
    off = off.to(dtype) if off is not None else None
    nparam = lambda m: sum(p.numel() for p in m.parameters()) / 1e6  # noqa: E731
    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    mem_kind = "peak allocated" if device.type == "cuda" else "saved for backward"
    print(f"# device: {dev_name}; torch {torch.__version__}; dtype {args.dtype}{' (TF32)' if args.tf32 else ''}; "
          f"--folnet-trans-impl {args.trans_impl}")
    print(f"# FOLNet folnet_base widths, ops {args.ops}, L={layers}: {nparam(folnet):.1f}M params; "
          f"transformer (RoBERTa, D=768, H=12, FFN 3072, L={layers}): {nparam(trf):.1f}M params; batch {args.batch}")
    if off is not None:
        print(f"# official FOLNet (folnet.py from {args.official_repo}) + BERT MLM head: {nparam(off):.1f}M params")
    off_cols = " official step (s) | official/ours time | official/ours CPU time |" if off is not None else ""
    print(f"| T | FOLNet step (s) | transformer step (s) | time ratio | CPU-time ratio | FOLNet mem (MiB, {mem_kind}) | "
          f"transformer mem (MiB) | memory ratio |{off_cols}")
    print("|---|---|---|---|---|---|---|---|" + ("---|---|---|" if off is not None else ""))
    for T in lengths:
        batch = make_batch(d, args.batch, T, device)
        res = {"f": [], "t": [], "o": []}
        cpu = {"f": [], "t": [], "o": []}
        mem = {}
        models = (("f", folnet), ("t", trf)) + ((("o", off),) if off is not None else ())
        for r in range(args.repeats + 1):
            for key, model in models:
                dt, dc, m = step(model, batch, device, measure_memory=(r == 0))
                if r == 0:
                    mem[key] = m
                else:
                    res[key].append(dt)
                    cpu[key].append(dc)
        tf, tt = min(res["f"]), min(res["t"])
        cr = min(cpu["f"]) / min(cpu["t"])
        mf, mt = mem["f"] / 2 ** 20, mem["t"] / 2 ** 20
        extra = ""
        if off is not None:
            to = min(res["o"])
            extra = f" {to:.3f} | {to / tf:.2f} | {min(cpu['o']) / min(cpu['f']):.2f} |"
        print(f"| {T} | {tf:.3f} | {tt:.3f} | {tf / tt:.2f} | {cr:.2f} | {mf:.0f} | {mt:.0f} | {mf / mt:.2f} |{extra}",
              flush=True)
    T = args.breakdown_length or max(lengths)
    del folnet, trf, off
    times = op_breakdown(cfg, T, args.batch, device, args.repeats, dtype)
    total = sum(times.values())
    print(f"\n# per-operator forward+backward, one layer, T={T}, batch {args.batch}")
    print("| operator | time (ms) | share |")
    print("|---|---|---|")
    for name, t in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {1e3 * t:.1f} | {100 * t / total:.0f}% |")


if __name__ == "__main__":
    main()
