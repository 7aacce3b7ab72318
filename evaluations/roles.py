"""``nesyseq analyze roles``: what the TP-Transformer's roles encode (paper Sec. 5.1, Fig. 3).

Sample problems of one module, collect the role vectors r^h_t of one head of
the final encoder layer at every position, cluster them with k-means (k = 20 in
the paper) and draw each problem as a row of characters on squares coloured by
their role cluster.

What the clusters correspond to is counted, not eyeballed: every character gets a class
(a digit of a numerator, i.e. the left operand of '/', a digit of a denominator, another digit,
an operator, a sign, a bracket, a letter, a space, other punctuation: :func:`char_classes`), and
``roles_clusters.csv`` beside the PNG lists each cluster's class counts, its dominant class and
purity.  The weighted purity is set beside chance: the same cluster sizes over randomly permuted
characters (``roles_summary.json``).
"""
import argparse
import csv
import io
import json
import random
from pathlib import Path
from typing import Dict, List, Tuple

import torch

from nesyseq.data_prep.math_preprocess import SPACE
from nesyseq.evaluations.plotting import pyplot, save_png
from nesyseq.common.atomic import atomic_write_bytes
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
    """The checked checkpoint's model (evaluations/checkpoints.py: safe load, a translation
    checkpoint whose dictionaries are ``data``'s), which must have roles."""
    from nesyseq.evaluations import checkpoints

    model, _, task, _ = checkpoints.load_model(checkpoint, data, ("translation",), "analyze roles")
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


CLASSES = ("numerator", "denominator", "digit", "operator", "sign", "bracket", "letter", "space",
           "punctuation")
DIGIT_CLASSES = ("numerator", "denominator", "digit")


def char_classes(chars: List[str]) -> List[str]:
    """One class per character of a problem (``SPACE`` stands for ' ').  A number is a maximal run
    of digits; it is a numerator when the next character after its closing brackets is '/', a
    denominator when the character before it (skipping '(' and its sign) is '/'.  A '-' is a sign
    when a digit follows and it does not follow a digit or ')'."""
    s = ["" if c is None else c for c in chars]
    n = len(s)
    out = [""] * n
    i = 0
    while i < n:
        c = s[i]
        if c.isdigit():
            j = i
            while j < n and s[j].isdigit():
                j += 1
            after = j
            while after < n and s[after] == ")":
                after += 1
            before = i - 1
            while before >= 0 and s[before] in "(-" and not (s[before] == "-" and before > 0 and
                                                               (s[before - 1].isdigit() or s[before - 1] == ")")):
                before -= 1
            if after < n and s[after] == "/":
                cls = "numerator"
            elif before >= 0 and s[before] == "/":
                cls = "denominator"
            else:
                cls = "digit"
            out[i:j] = [cls] * (j - i)
            i = j
            continue
        if c == "-" and i + 1 < n and s[i + 1].isdigit() and not (i > 0 and (s[i - 1].isdigit() or s[i - 1] == ")")):
            out[i] = "sign"
        elif c in "+-*/=":
            out[i] = "operator"
        elif c in "()":
            out[i] = "bracket"
        elif c.isalpha():
            out[i] = "letter"
        elif c in (SPACE, " "):
            out[i] = "space"
        else:
            out[i] = "punctuation"
        i += 1
    return out


def cluster_table(classes: List[str], labels: List[int], k: int):
    """Per cluster: size, count per class, dominant class, purity; and the weighted purity."""
    rows = []
    for j in range(k):
        members = [c for c, lab in zip(classes, labels) if lab == j]
        if not members:
            continue
        counts = {c: members.count(c) for c in CLASSES}
        top = max(CLASSES, key=lambda c: counts[c])
        rows.append(dict(cluster=j, size=len(members), **counts, dominant=top,
                         purity=counts[top] / len(members)))
    weighted = sum(r["purity"] * r["size"] for r in rows) / max(1, len(classes))
    return rows, weighted


def chance_purity(classes: List[str], labels: List[int], k: int, draws: int = 50, seed: int = 0) -> float:
    """Weighted purity of the same cluster sizes over randomly permuted characters."""
    rng = random.Random(seed)
    perm = list(classes)
    total = 0.0
    for _ in range(draws):
        rng.shuffle(perm)
        total += cluster_table(perm, labels, k)[1]
    return total / draws


def write_cluster_report(rows, weighted: float, chance: float, out_png: Path, meta: dict) -> Dict[str, Path]:
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=["cluster", "size", *CLASSES, "dominant", "purity"])
    w.writeheader()
    for r in rows:
        w.writerow(dict(r, purity=f"{r['purity']:.3f}"))
    csv_path = out_png.with_name(out_png.stem + "_clusters.csv")
    json_path = out_png.with_name(out_png.stem + "_summary.json")
    atomic_write_bytes(str(csv_path), buf.getvalue().encode("utf-8"))
    summary = dict(meta, weighted_purity=round(weighted, 4), chance_purity=round(chance, 4),
                   clusters=len(rows))
    atomic_write_bytes(str(json_path), (json.dumps(summary, indent=1) + "\n").encode("utf-8"))
    return {"csv": csv_path, "summary": json_path}


def analyze_roles(checkpoint, data, module: str, out: Path, n: int = 128, k: int = 20,
                  head: int = 0, show: int = 24, seed: int = 0) -> Path:
    checkpoint, data = Path(checkpoint).resolve(), Path(data).resolve()
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
    k_used = min(k, len(allr))
    draw_grid(rows[:show], per_row[:show], k_used, out,
              f"{module}: role clusters (k={k}) of head {head}, last encoder layer")
    classes = [c for toks, _ in rows for c in char_classes(toks)]
    table, weighted = cluster_table(classes, labels.tolist(), k_used)
    chance = chance_purity(classes, labels.tolist(), k_used, seed=seed)
    # the paper's finding: numerator and denominator digits in separate clusters.  Among the
    # digits only: how pure are the clusters in numerator / denominator / other digit, and chance
    digits = [(c, lab) for c, lab in zip(classes, labels.tolist()) if c in DIGIT_CLASSES]
    d_classes, d_labels = [c for c, _ in digits], [lab for _, lab in digits]
    digit_purity = cluster_table(d_classes, d_labels, k_used)[1] if digits else float("nan")
    digit_chance = chance_purity(d_classes, d_labels, k_used, seed=seed) if digits else float("nan")
    write_cluster_report(table, weighted, chance, out, dict(
        checkpoint=str(checkpoint), module=module, problems=len(rows), k=k, head=head, seed=seed,
        digits=len(digits), digit_purity=round(digit_purity, 4), digit_chance_purity=round(digit_chance, 4)))
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
    summary = json.loads(path.with_name(path.stem + "_summary.json").read_text())
    print(f"weighted purity of the clusters over character classes: {summary['weighted_purity']:.3f} "
          f"(chance {summary['chance_purity']:.3f}); per cluster: {path.with_name(path.stem + '_clusters.csv')}")
    return 0
