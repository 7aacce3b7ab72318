"""FOLNet training memory: what one layer keeps for backward, and a model of a GPU's peak.

    nesyseq memory folnet --layers 12 --T 512 --batch 8 --dtype bf16 [--official-repo DIR] [--plain]

Counting (``saved_bytes``): one forward pass of a layer under
``torch.autograd.graph.saved_tensors_hooks``, adding up the bytes of the distinct
storages autograd keeps for backward; parameters are left out (they live anyway),
the layer's inputs are counted when something keeps them.  What is kept depends on
the code path, not on the device, so the CPU counts the GPU's path: the layer runs
under CPU autocast for bf16/fp16, with trans on the path a CUDA GPU takes
(``gpu_trans_impl``: the Triton kernels, whose outputs ``kernels_as_shapes`` stands
in for while counting).  What the CPU cannot reproduce: CUDA autocast's op lists
differ from the CPU's for a few ops the official code leaves to autocast (its
softmaxes), and the caching allocator's fragmentation is not modelled.

The model (``predict``): per-layer bytes are counted exactly at a few small lengths
and batch sizes and fitted as B·(a·T² + b·T + e) + c (every kept tensor is B·T·T·k,
B·T·k or, under autocast, a batch-free weight copy; ``LayerFit`` checks the fit
against one more count), then

    peak = L · layer(T, B) + outside(T, B) + 16 bytes · params + transient(T, B)

with 16 bytes per parameter for the fp32 weight, its gradient and Adam's two
moments, ``outside`` the tensors kept outside the layers (relative-position
binary atoms and their LayerNorm, unary embeddings, the MLM head on 15% of the
tokens), and ``transient`` the top layer's backward: 4 fp32 binary tensors
(gradients) alive beside everything kept.  The official layer is counted from a
checkout of tencent-ailab/FOLNet (``--official-repo``, imported from there, never
copied).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import torch

from nesyseq.common.errors import UserError

# folnet_base widths (plugins/models/folnet.py) and the official FOLNet-base config
D1, D2, HEADS, F1, F2 = 768, 64, 12, 3072, 256
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
GB = 1e9


class SavedBytes:
    """Distinct storages kept for backward (parameters left out), with where they were kept.

    ``where``: bytes per "file:line" of the innermost frame under one of ``roots``
    (the code that asked autograd to keep the tensor), to see what a layer keeps.
    """

    def __init__(self, params=(), roots: Tuple[str, ...] = ()):
        self.params = {p.untyped_storage().data_ptr() for p in params}
        self.seen: Dict[int, int] = {}
        self.roots = tuple(str(Path(r).resolve()) for r in roots)
        self.where: Dict[str, int] = defaultdict(int)

    def pack(self, t):
        try:
            s = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # tensors without storage
            return t
        key = s.data_ptr()
        if key in self.params or key in self.seen or s.nbytes() == 0:
            return t
        self.seen[key] = s.nbytes()
        if self.roots:
            site = "?"
            for fr in reversed(traceback.extract_stack()[:-1]):
                if fr.filename.startswith(self.roots):
                    site = f"{Path(fr.filename).name}:{fr.lineno} {fr.line.strip()[:60]}"
                    break
            self.where[f"{site} {tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"] += s.nbytes()
        return t

    @staticmethod
    def unpack(t):
        return t

    @property
    def total(self) -> int:
        return sum(self.seen.values())


def saved_bytes(module: torch.nn.Module, run: Callable[[], object], dtype: torch.dtype = torch.float32,
                roots: Tuple[str, ...] = ()) -> SavedBytes:
    """Count what ``run()`` (a forward of ``module``) keeps; under CPU autocast for bf16/fp16."""
    s = SavedBytes(module.parameters(), roots)
    with torch.autograd.graph.saved_tensors_hooks(s.pack, s.unpack):
        if dtype == torch.float32:
            run()
        else:
            with torch.autocast("cpu", dtype=dtype):
                run()
    return s


# ----------------------------------------------------------------------------- the layers


def ours_layer(dropout: float = 0.0, lean: bool = True, ops: str = "jmc.atp", trans_impl: str = "auto"):
    from nesyseq.plugins.layers.folnet_layer import FolnetLayer
    from nesyseq.plugins.layers.folnet_ops import parse_ops
    unary, binary = parse_ops(ops)
    torch.manual_seed(0)
    layer = FolnetLayer(d1=D1, d2=D2, heads=HEADS, ffn1=F1, ffn2=F2, unary_ops=unary, binary_ops=binary,
                        dropout=dropout, trans_impl=trans_impl).train()
    layer.lean = lean
    return layer


OFFICIAL_NAMES = {"c": "cjoin", "j": "join", "m": "mu", "a": "assoc", "p": "prod", "t": "trans"}


def official_module(repo: str):
    """The authors' folnet.py and config_folnet.py, imported from a checkout (never copied here)."""
    path = Path(repo).resolve()
    if not (path / "folnet.py").is_file() or not (path / "config_folnet.py").is_file():
        raise UserError(f"--official-repo {repo}: no folnet.py / config_folnet.py there "
                        f"(a checkout of tencent-ailab/FOLNet)")
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    import folnet as official  # noqa: E402
    from config_folnet import FOLNetConfig  # noqa: E402
    return official, FOLNetConfig


def official_config(repo: str, layers: int = 1, dropout: float = 0.0, ops: str = "jmc.atp", vocab: int = 30528):
    official, FOLNetConfig = official_module(repo)
    left, right = ops.split(".")
    return official, FOLNetConfig(
        hidden_act="gelu", hidden_dropout_prob=dropout, layer_norm_eps=1e-12, initializer_range=0.02,
        max_position_offset=64, absolute_position=False, relative_position=True, vocab_size=vocab,
        type_vocab_size=2, diag_link=False, num_layers=layers, boolean_type="mlp",
        mixer_ops={0: None, 1: tuple(OFFICIAL_NAMES[c] for c in left), 2: tuple(OFFICIAL_NAMES[c] for c in right)},
        predicate_dims=(0, D1, D2), intermediate_dims=(0, F1, F2), num_heads=HEADS, head_size=D1 // HEADS,
        hidden_size=D1)


def official_layer(repo: str, dropout: float = 0.0, ops: str = "jmc.atp"):
    official, cfg = official_config(repo, 1, dropout, ops)
    torch.manual_seed(0)
    return official.ReasonerLayer(cfg).train()


def layer_inputs(T: int, B: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    u1 = torch.randn(B, T, D1, generator=g).requires_grad_()
    u2 = torch.randn(B, T, T, D2, generator=g).requires_grad_()
    return u1, u2


def gpu_trans_impl(T: int, dtype: torch.dtype) -> str:
    """The trans path a CUDA GPU takes under impl 'auto' for an unpadded batch of length T."""
    from nesyseq import triton_kernels
    from nesyseq.triton_kernels import TransMask
    if not triton_kernels.trans_triton.triton_available():
        return "eager"
    return triton_kernels.auto_path(torch.empty(1, D2, T, T, dtype=dtype, device="meta"), TransMask())


@contextlib.contextmanager
def kernels_as_shapes():
    """While counting, the Triton trans kernels return empty tensors of their outputs' shapes.

    The CPU runs the kernels only through the (slow) interpreter, and counting needs
    none of their values: what ``TransFunction`` / ``TransFromAtoms`` keep is fixed by
    their code (their inputs or atoms, the output, the softmax statistics).  Only the
    forward runs under this; backward would read garbage.
    """
    from nesyseq.triton_kernels import trans_triton as tt
    saved = tt._forward, tt._mode_for, tt._pick_config

    def forward(K, v, v_enc, pr, cfg, interpret):
        return (torch.empty(pr.B, pr.H, pr.Tq, pr.Y, dtype=K.dtype, device=K.device),
                torch.empty(pr.B * pr.H, pr.Tq, dtype=torch.float32, device=K.device))

    tt._forward, tt._mode_for = forward, (lambda t: True)
    tt._pick_config = lambda K, v, v_enc, pr, interpret, with_backward: tt.default_config(K.dtype, pr.Ti + pr.Tt)
    try:
        yield
    finally:
        tt._forward, tt._mode_for, tt._pick_config = saved


def count_layer(kind: str, T: int, B: int, dtype: torch.dtype = torch.float32, dropout: float = 0.0,
                official_repo: Optional[str] = None, roots: Tuple[str, ...] = (), layer=None) -> SavedBytes:
    """Bytes one layer keeps at (T, B): kind 'ours' (lean), 'plain' (ours, lean off) or 'official'.
    A layer of ours with trans impl 'triton' is counted with ``kernels_as_shapes`` (forward only)."""
    from nesyseq.plugins.layers.folnet_masks import self_mask
    u1, u2 = layer_inputs(T, B)
    if kind == "official":
        layer = layer or official_layer(official_repo, dropout)
        return saved_bytes(layer, lambda: layer((None, u1, u2)), dtype, roots)
    layer = layer or ours_layer(dropout, lean=(kind == "ours"))
    mask = self_mask("none", torch.zeros(B, T, dtype=torch.bool))
    if "t" in layer.ops and layer.ops["t"].impl == "triton":
        with kernels_as_shapes():
            return saved_bytes(layer, lambda: layer(u1, u2, mask), dtype, roots)
    return saved_bytes(layer, lambda: layer(u1, u2, mask), dtype, roots)


# ----------------------------------------------------------------------------- the model


class LayerFit:
    """bytes(T, B) = B·(a·T² + b·T + e) + c, fitted to exact counts at small shapes."""

    POINTS = ((16, 1), (32, 1), (64, 1), (32, 2))
    CHECK = (48, 2)

    def __init__(self, count: Callable[[int, int], int]):
        rows = [[B * T * T, B * T, B, 1.0] for T, B in self.POINTS]
        y = torch.tensor([float(count(T, B)) for T, B in self.POINTS], dtype=torch.float64)
        self.coef = torch.linalg.solve(torch.tensor(rows, dtype=torch.float64), y)
        T, B = self.CHECK
        self.check = (float(count(T, B)), self(T, B))

    def __call__(self, T: int, B: int) -> float:
        a, b, e, c = self.coef.tolist()
        return B * (a * T * T + b * T + e) + c

    @property
    def check_error(self) -> float:
        got, want = self.check
        return abs(want - got) / got


def fit_layer(kind: str, dtype: torch.dtype, dropout: float = 0.0, official_repo: Optional[str] = None,
              trans_impl: str = "auto") -> LayerFit:
    """``trans_impl`` 'triton' counts trans on the kernels (run by the Triton interpreter on the CPU)."""
    if kind == "official":
        layer = official_layer(official_repo, dropout)
    else:
        layer = ours_layer(dropout, kind == "ours", trans_impl=trans_impl)
    return LayerFit(lambda T, B: count_layer(kind, T, B, dtype, dropout, official_repo, layer=layer).total)


def ours_params(layers: int, vocab: int = 30528) -> int:
    """folnet_base parameters with ``layers`` layers (tied MLM head), counted on the model itself."""
    from nesyseq.plugins.layers.folnet_layer import FolnetStack
    per_layer = sum(p.numel() for p in ours_layer().parameters())
    # embeddings: words, 2 types, relative positions (2·64+2 ids, D2), MLM head dense + bias
    outside = vocab * D1 + 2 * D1 + (2 * 64 + 2) * D2 + D1 * D1 + D1 + vocab
    del FolnetStack
    return layers * per_layer + outside


def outside_bytes(T: int, B: int, dtype: torch.dtype) -> float:
    """Kept outside the layers: relative-position atoms (gathered, LN'd: 2 binary tensors in the
    activation dtype), the unary embeddings (2), the final LNs' inputs, the MLM head on 15% of
    the tokens (dense D1 + vocabulary logits in fp32 for the loss)."""
    act = torch.tensor([], dtype=dtype).element_size()
    binary = B * T * T * D2
    unary = B * T * D1
    masked = 0.15 * B * T
    return 2 * binary * act + 2 * binary * 4 + 3 * unary * 4 + masked * (D1 * 3 * act + 30528 * 4 * 2)


def predict(fit: LayerFit, layers: int, T: int, B: int, dtype: torch.dtype, params: int) -> Dict[str, float]:
    parts = {
        "layers": layers * fit(T, B),
        "outside": outside_bytes(T, B, dtype),
        "weights+grads+adam": 16.0 * params,
        # backward of the top layer: the gradients of u2 in and out (fp32) and of one operator's two
        # binary inputs, alive at once beside everything kept: 4 fp32 binary tensors
        "backward transient": 4.0 * B * T * T * D2 * 4,
    }
    parts["peak"] = sum(parts.values())
    return parts


# ----------------------------------------------------------------------------- CLI


def add_arguments(p: argparse.ArgumentParser):
    p.add_argument("--layers", type=int, default=12, help="number of FOLNet layers (folnet_base: 12)")
    p.add_argument("--T", type=int, default=128, help="sequence length")
    p.add_argument("--batch", type=int, default=32, help="sequences per GPU step")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16",
                   help="activation dtype: bf16/fp16 = autocast with fp32 weights, fp32 = full precision")
    p.add_argument("--official-repo", default=None,
                   help="a checkout of tencent-ailab/FOLNet: also predict the authors' code")
    p.add_argument("--plain", action="store_true", help="also predict ours with FolnetLayer.lean off")
    p.add_argument("--gpu-gb", default="40,80,141", help="GPU sizes (GB) for the fits column")


def largest_batch(fit: LayerFit, layers: int, T: int, dtype: torch.dtype, params: int, size_gb: float) -> int:
    """The largest B whose predicted peak fits in ``size_gb`` (the peak is affine in B); 0 if none."""
    p0 = predict(fit, layers, T, 0, dtype, params)["peak"]
    p1 = predict(fit, layers, T, 1, dtype, params)["peak"] - p0
    return max(0, int((size_gb * GB - p0) // p1))


def run(args):
    if args.layers < 1 or args.T < 2 or args.batch < 1:
        raise UserError(f"--layers {args.layers} --T {args.T} --batch {args.batch}: need L >= 1, T >= 2, B >= 1")
    try:
        sizes = [float(x) for x in str(args.gpu_gb).split(",") if x]
    except ValueError:
        raise UserError(f"--gpu-gb {args.gpu_gb!r}: a comma-separated list of sizes in GB, e.g. 40,80,141") from None
    if args.official_repo:
        official_module(args.official_repo)  # a wrong path fails before any counting
    torch.set_num_threads(1)
    dtype = DTYPES[args.dtype]
    kinds = ["ours"] + (["plain"] if args.plain else []) + (["official"] if args.official_repo else [])
    params = ours_params(args.layers)
    print(f"# FOLNet-base widths, L={args.layers}, T={args.T}, batch {args.batch}, "
          f"{args.dtype}{' autocast' if dtype != torch.float32 else ''}, Adam; {params / 1e6:.1f}M parameters; "
          f"dropout 0; trans counted on the GPU's path ({gpu_trans_impl(args.T, dtype)}); a prediction, "
          f"not a GPU measurement")
    print("| code | per layer kept (GB) | layers (GB) | outside (GB) | weights+grads+Adam (GB) | "
          "backward transient (GB) | predicted peak (GB) | " + " | ".join(f"fits {s:g} GB" for s in sizes) + " |")
    print("|---|---|---|---|---|---|---|" + "---|" * len(sizes))
    impl = gpu_trans_impl(args.T, dtype)
    for kind in kinds:
        fit = fit_layer(kind, dtype, official_repo=args.official_repo, trans_impl=impl)
        if fit.check_error > 0.03:
            raise UserError(f"{kind}: the saved-bytes fit misses a check count by {100 * fit.check_error:.1f}%")
        p = predict(fit, args.layers, args.T, args.batch, dtype, params)
        name = {"ours": "ours (lean)", "plain": "ours, lean off", "official": "official"}[kind]
        fits = " | ".join("yes" if p["peak"] <= s * GB else "no" for s in sizes)
        print(f"| {name} | {fit(args.T, args.batch) / GB:.2f} | {p['layers'] / GB:.1f} | {p['outside'] / GB:.1f} | "
              f"{p['weights+grads+adam'] / GB:.1f} | {p['backward transient'] / GB:.1f} | {p['peak'] / GB:.1f} | "
              f"{fits} |", flush=True)
