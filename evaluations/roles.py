"""``nesyseq analyze roles``: what the TP-Transformer's roles encode (paper Sec. 5.1, Fig. 3).

Sample problems of one module, collect the role vectors r^h_t of one head of
the final encoder layer at every position, cluster them with k-means (k = 20 in
the paper) and draw each problem as a row of characters on squares coloured by
their role cluster.
"""
import argparse
import random
from pathlib import Path
from typing import List, Tuple

import torch

from nesyseq.data_prep.math_preprocess import SPACE
from nesyseq.evaluations.plotting import pyplot, save_png
from nesyseq.common.errors import UserError


def kmeans(x: torch.Tensor, k: int, iters: int = 50, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's k-means with k-means++ seeding.  x (N, D) -> labels (N,), centroids (k, D)."""
    g = torch.Generator().manual_seed(seed)
    x = x.double()
    n = x.shape[0]
    k = min(k, n)
    centroids = x[torch.randint(n, (1,), generator=g)]
    for _ in range(1, k):  # k-means++: next centre with probability ∝ squared distance
        d2 = torch.cdist(x, centroids).min(dim=1).values ** 2
        probs = d2 / d2.sum() if d2.sum() > 0 else torch.full((n,), 1.0 / n, dtype=x.dtype)
        centroids = torch.cat([centroids, x[torch.multinomial(probs, 1, generator=g)]])
    labels = torch.cdist(x, centroids).argmin(dim=1)
    for _ in range(iters):
        for j in range(k):
            members = x[labels == j]
            if len(members):
                centroids[j] = members.mean(0)
        new = torch.cdist(x, centroids).argmin(dim=1)
        if torch.equal(new, labels):
            break
        labels = new
    return labels, centroids.float()


def load_model(checkpoint: Path, data: Path):
    from nesyseq import plugins  # noqa: F401  (registers tp_transformer)
    from fairseq import checkpoint_utils

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(checkpoint)], arg_overrides={"data": str(data)})
    model = models[0].eval()
    if not hasattr(model.encoder, "layers") or not hasattr(model.encoder.layers[-1], "self_attn"):
        raise UserError(f"{checkpoint}: not a tp_transformer checkpoint")
    if not model.encoder.layers[-1].self_attn.role_binding:
        raise UserError(f"{checkpoint}: this model has no roles (role binding is off)")
    return model, task


def sample_problems(text_dir: Path, module: str, n: int, seed: int) -> List[str]:
    src, mods = text_dir / "test.src", text_dir / "test.modules"
    for p in (src, mods):
        if not p.is_file():
            raise UserError(f"{p}: missing (written by 'nesyseq prepare math')")
    with open(src, encoding="utf-8") as fs, open(mods, encoding="utf-8") as fm:
        pairs = [(s.rstrip("\n"), m.strip()) for s, m in zip(fs, fm)]
    available = sorted({m for _, m in pairs})
    chosen = [s for s, m in pairs if m == module]
    if not chosen:
        raise UserError(f"--module {module}: not in {mods}; available: {', '.join(available)}")
    random.Random(seed).shuffle(chosen)
    return chosen[:n]


def collect_roles(model, task, problems: List[str], head: int):
    """Roles of ``head`` in the last encoder layer: list of (chars, (T, d_k) tensor)."""
    d = task.source_dictionary
    attn = model.encoder.layers[-1].self_attn
    H, dk = attn.num_heads, attn.head_dim
    if not 0 <= head < H:
        raise UserError(f"--head {head}: the model has heads 0..{H - 1}")
    out = []
    with torch.no_grad():
        for line in problems:
            toks = line.split(" ")
            ids = torch.tensor([[d.index(t) for t in toks] + [d.eos()]])
            enc = model.encoder(ids, src_lengths=torch.tensor([ids.shape[1]]), return_all_roles=True)
            r = enc["roles"][-1][0, : len(toks), head * dk: (head + 1) * dk]
            out.append((toks, r))
    return out


def draw_grid(rows, labels_per_row, k: int, path: Path, title: str) -> None:
    plt = pyplot()
    width = max(len(t) for t, _ in rows)
    fig, ax = plt.subplots(figsize=(0.16 * width + 1, 0.3 * len(rows) + 0.8))
    cmap = plt.get_cmap("tab20", max(k, 2))
    for i, ((toks, _), labels) in enumerate(zip(rows, labels_per_row)):
        for j, (ch, lab) in enumerate(zip(toks, labels.tolist())):
            ax.add_patch(plt.Rectangle((j, -i - 1), 1, 1, color=cmap(lab)))
            ax.text(j + 0.5, -i - 0.5, " " if ch == SPACE else ch, ha="center", va="center",
                    fontsize=7, family="monospace")
    ax.set_xlim(0, width)
    ax.set_ylim(-len(rows), 0)
    ax.axis("off")
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=130)


def analyze_roles(checkpoint, data, module: str, out: Path, n: int = 128, k: int = 20,
                  head: int = 0, show: int = 24, seed: int = 0) -> Path:
    checkpoint, data = Path(checkpoint).resolve(), Path(data).resolve()
    if not checkpoint.is_file():
        raise UserError(f"--checkpoint {checkpoint}: no such file")
    text_dir = data.parent / "text" if (data.parent / "text").is_dir() else data
    model, task = load_model(checkpoint, data)
    problems = sample_problems(text_dir, module, n, seed)
    rows = collect_roles(model, task, problems, head)
    allr = torch.cat([r for _, r in rows])
    labels, _ = kmeans(allr, k, seed=seed)
    per_row, start = [], 0
    for toks, _ in rows:
        per_row.append(labels[start: start + len(toks)])
        start += len(toks)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    draw_grid(rows[:show], per_row[:show], min(k, len(allr)), out,
              f"{module}: role clusters (k={k}) of head {head}, last encoder layer")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True, help="tp_transformer checkpoint (.pt)")
    parser.add_argument("--data", required=True, help="binarized data dir (DIR/bin of 'prepare math')")
    parser.add_argument("--module", default="arithmetic__mixed",
                        help="module whose interpolate problems are sampled (paper: arithmetic__mixed)")
    parser.add_argument("--samples", type=int, default=128, help="problems to sample (paper: 128)")
    parser.add_argument("--k", type=int, default=20, help="k-means clusters (paper: 20)")
    parser.add_argument("--head", type=int, default=0, help="which head of the final encoder layer")
    parser.add_argument("--show", type=int, default=24, help="problems drawn in the PNG")
    parser.add_argument("--seed", type=int, default=0, help="sampling and k-means seed")
    parser.add_argument("--out", default="roles.png", help="output PNG")


def run(args) -> int:
    path = analyze_roles(args.checkpoint, args.data, args.module, Path(args.out), n=args.samples,
                         k=args.k, head=args.head, show=args.show, seed=args.seed)
    print(f"role clusters: {path}")
    return 0
