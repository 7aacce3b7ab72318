"""Propositional logical entailment (Evans et al. 2018): reader, truth-table labeller, generator, heuristics.

Syntax:  F := [a-z] | ~(F) | (F op F),  op ∈ {&, |, >}  (> is implication); no spaces.
Lines:   A,B,E,H1,H2,H3  (Evans et al.'s files)   or   A,B,E  (ours);  E = 1 iff A ⊨ B.

Formulas are trees of tuples: 'a' | ('~', F) | (op, F, F).  Truth tables are Python ints used
as bitsets over the 2^k assignments of the k variables involved (bit i = assignment i).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

OPS = "&|>"
LETTERS = "abcdefghijklmnopqrstuvwxyz"   # variable pool (a module constant so tests can shrink it)
SPLITS = ("train", "validate", "test_easy", "test_hard", "test_big", "test_massive", "test_exam")


class FormulaError(ValueError):
    pass


# ---- parsing / printing ------------------------------------------------------------------------
def parse_formula(s: str):
    """Parse the strict syntax; raise FormulaError with the character position on bad input."""
    pos = 0

    def expect(ch):
        nonlocal pos
        if pos >= len(s) or s[pos] != ch:
            got = s[pos] if pos < len(s) else "end of formula"
            raise FormulaError(f"expected {ch!r} at character {pos + 1}, got {got!r}")
        pos += 1

    def node():
        nonlocal pos
        if pos >= len(s):
            raise FormulaError(f"unexpected end of formula at character {pos + 1}")
        c = s[pos]
        if "a" <= c <= "z":
            pos += 1
            return c
        if c == "~":
            pos += 1
            expect("(")
            f = node()
            expect(")")
            return ("~", f)
        if c == "(":
            pos += 1
            left = node()
            if pos >= len(s) or s[pos] not in OPS:
                got = s[pos] if pos < len(s) else "end of formula"
                raise FormulaError(f"expected an operator (&, |, >) at character {pos + 1}, got {got!r}")
            op = s[pos]
            pos += 1
            right = node()
            expect(")")
            return (op, left, right)
        raise FormulaError(f"unexpected character {c!r} at character {pos + 1}")

    if not s:
        raise FormulaError("empty formula")
    tree = node()
    if pos != len(s):
        raise FormulaError(f"trailing characters from character {pos + 1}: {s[pos:]!r}")
    return tree


def to_string(f) -> str:
    if isinstance(f, str):
        return f
    if f[0] == "~":
        return f"~({to_string(f[1])})"
    return f"({to_string(f[1])}{f[0]}{to_string(f[2])})"


def variables(f) -> set:
    if isinstance(f, str):
        return {f}
    return set().union(*(variables(c) for c in f[1:]))


# ---- truth tables as bitsets --------------------------------------------------------------------
def truth_table(f, order: Sequence[str]) -> int:
    """Bitset of the assignments (over ``order``) that satisfy f."""
    k = len(order)
    full = (1 << (1 << k)) - 1
    cols = {}
    for j, v in enumerate(order):
        # bit i set iff variable j is true in assignment i (bit j of i)
        block = ((1 << (1 << j)) - 1) << (1 << j)            # 2^j ones after 2^j zeros
        period = 1 << (j + 1)
        col = 0
        for start in range(0, 1 << k, period):
            col |= block << start
        cols[v] = col

    def ev(g):
        if isinstance(g, str):
            return cols[g]
        if g[0] == "~":
            return full & ~ev(g[1])
        a, b = ev(g[1]), ev(g[2])
        if g[0] == "&":
            return a & b
        if g[0] == "|":
            return a | b
        return (full & ~a) | b

    return ev(f)


def entails(a, b) -> bool:
    order = sorted(variables(a) | variables(b))
    ta, tb = truth_table(a, order), truth_table(b, order)
    return ta & ~tb == 0


# ---- reading -------------------------------------------------------------------------------------
@dataclass
class Example:
    a: str
    b: str
    label: int
    heuristics: Optional[Tuple[float, float, float]] = None


def read_file(path: str) -> List[Example]:
    """Read a 6- or 3-field file; malformed lines raise FormulaError 'path:line: why'."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split(",")
            where = f"{path}:{lineno}"
            if len(fields) not in (3, 6):
                raise FormulaError(f"{where}: expected 6 fields (A,B,E,H1,H2,H3) or 3 (A,B,E), got {len(fields)}")
            a, b, e = fields[:3]
            for name, s in (("A", a), ("B", b)):
                try:
                    parse_formula(s)
                except FormulaError as err:
                    raise FormulaError(f"{where}: formula {name} {s!r}: {err}") from None
            if e not in ("0", "1"):
                raise FormulaError(f"{where}: label E must be 0 or 1, got {e!r}")
            heur = None
            if len(fields) == 6:
                try:
                    heur = tuple(float(h) for h in fields[3:])
                except ValueError:
                    raise FormulaError(f"{where}: heuristic scores H1-H3 must be numbers, got {fields[3:]}") from None
            out.append(Example(a, b, int(e), heur))
    return out


def write_file(path: str, examples: Iterable[Example]) -> None:
    """Atomic write (tmp + fsync + rename), 3 fields per line."""
    from nesyseq.common.atomic import atomic_write_bytes

    atomic_write_bytes(path, "".join(f"{ex.a},{ex.b},{ex.label}\n" for ex in examples).encode("utf-8"))


# ---- generator -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SplitSpec:
    size: int
    max_vars: int       # distinct variables per pair
    min_ops: int        # binary operators per formula
    max_ops: int


DEFAULT_SPECS: Dict[str, SplitSpec] = {
    "train": SplitSpec(20000, 5, 1, 6),
    "validate": SplitSpec(2000, 5, 1, 6),
    "test_easy": SplitSpec(2000, 5, 1, 6),
    "test_hard": SplitSpec(2000, 8, 6, 12),
    "test_big": SplitSpec(2000, 10, 10, 18),
    "test_massive": SplitSpec(1000, 12, 16, 28),
}


def random_formula(rng: random.Random, var_set: Sequence[str], n_ops: int, n_neg: int):
    """A random tree with exactly n_ops binary nodes and n_neg negations, using every variable of
    var_set at least once (needs n_ops + 1 >= len(var_set))."""
    leaves = list(var_set) + [rng.choice(var_set) for _ in range(n_ops + 1 - len(var_set))]
    rng.shuffle(leaves)
    nodes = leaves
    while len(nodes) > 1:                     # random binary bracketing
        i = rng.randrange(len(nodes) - 1)
        nodes[i:i + 2] = [(rng.choice(OPS), nodes[i], nodes[i + 1])]
    tree = nodes[0]
    for _ in range(n_neg):                    # wrap random subtrees in negations

        def wrap(t):
            if isinstance(t, str) or rng.random() < 0.3:
                return ("~", t)
            if t[0] == "~":
                return ("~", wrap(t[1]))
            if rng.random() < 0.5:
                return (t[0], wrap(t[1]), t[2])
            return (t[0], t[1], wrap(t[2]))

        tree = wrap(tree)
    return tree


def _four_tuples(rng: random.Random, spec: SplitSpec, n_formulas: int = 60, balance: bool = True):
    """Four-tuples (A, B, A', B') as Evans et al. build them (``Main.hs``, ``FourTuple``):
    A ⊨ B, A' ⊨ B', A ⊭ B', A' ⊭ B.  Each yields the lines (A,B,1), (A,B',0), (A',B',1), (A',B,0), so
    every formula is a premise once per label or a conclusion once per label: any statistic of A alone
    or of B alone is exactly balanced across labels.  With ``balance`` (default) a tuple is kept only if
    each heuristic H1-H4 (which compare A with B) fires as often on its two positive lines as on its two
    negative lines, so each scores exactly 50% on every whole tuple.

    One block: a variable pool of k letters (k in [ceil(max_vars/2), max_vars]); ``n_formulas`` random
    formulas over random subsets of it; all entailed ordered pairs found by truth-table bitsets (A not a
    contradiction, B not a tautology); then greedily pair entailed pairs into four-tuples, each formula
    used at most once. Returns a list of 4-line groups [(A, B, E), ...]."""
    k = rng.randint(max(1, (spec.max_vars + 1) // 2), spec.max_vars)
    pool = rng.sample(LETTERS, k)
    order = sorted(pool)
    full = (1 << (1 << k)) - 1
    forms: Dict[str, tuple] = {}              # string -> (truth table, heuristic stats); distinct strings
    for _ in range(n_formulas):
        n_ops = rng.randint(spec.min_ops, spec.max_ops)
        var_set = rng.sample(pool, rng.randint(1, min(k, n_ops + 1)))
        f = random_formula(rng, var_set, n_ops, rng.randint(0, 1 + n_ops // 3))
        forms.setdefault(to_string(f), (truth_table(f, order), formula_stats(f)))
    names = list(forms)
    tts = [forms[s][0] for s in names]
    stats = [forms[s][1] for s in names]

    def balanced(a, b, a2, b2):               # every heuristic fires equally often on both labels
        h = lambda x, y: heuristics_from_stats(stats[x], stats[y])
        pos = [p + q for p, q in zip(h(a, b), h(a2, b2))]
        neg = [p + q for p, q in zip(h(a, b2), h(a2, b))]
        return pos == neg
    entailed = [(i, j) for i, ti in enumerate(tts) if ti != 0 for j, tj in enumerate(tts)
                if j != i and tj != full and ti & ~tj == 0]
    rng.shuffle(entailed)
    used = set()
    groups = []
    for n, (a, b) in enumerate(entailed):
        if a in used or b in used:
            continue
        for a2, b2 in entailed[n + 1:]:
            if len({a, b, a2, b2}) < 4 or a2 in used or b2 in used:
                continue
            if tts[a] & ~tts[b2] != 0 and tts[a2] & ~tts[b] != 0 and (not balance or balanced(a, b, a2, b2)):
                used.update((a, b, a2, b2))
                A, B, A2, B2 = (names[x] for x in (a, b, a2, b2))
                groups.append([(A, B, 1), (A, B2, 0), (A2, B2, 1), (A2, B, 0)])
                break
    return groups


def generate_splits(specs: Dict[str, SplitSpec] = DEFAULT_SPECS, seed: int = 0) -> Dict[str, List[Example]]:
    """All splits from four-tuples; no (A, B) pair occurs twice (within or across splits); classes
    balanced (exactly when the size is even: the lines of a tuple alternate labels)."""
    rng = random.Random(seed)
    seen = set()
    out = {}
    for split, spec in specs.items():
        exs: List[Example] = []
        empty_blocks = 0
        while len(exs) < spec.size:
            added = 0
            for grp in _four_tuples(rng, spec):
                if len(exs) >= spec.size:
                    break
                if any((a, b) in seen for a, b, _ in grp):
                    continue
                for a, b, e in grp:
                    seen.add((a, b))
                    exs.append(Example(a, b, e))
                added += 1
            empty_blocks = 0 if added else empty_blocks + 1
            if empty_blocks > 200:
                raise RuntimeError(f"generator: cannot fill split {split} ({len(exs)}/{spec.size})")
        exs = exs[:spec.size]                 # a size not divisible by 4 drops the end of the last tuple
        rng.shuffle(exs)
        out[split] = exs
    return out


# ---- heuristic baselines --------------------------------------------------------------------------
def formula_length(f) -> int:
    """Evans et al.'s ``prop_length``: variables plus connectives (parentheses not counted)."""
    return 1 if isinstance(f, str) else 1 + sum(formula_length(c) for c in f[1:])


def nnf_literals(f, positive: bool = True) -> set:
    """The literals (variable, polarity) of f's negation normal form: ``~`` flips the polarity of its
    operand, ``>`` flips its antecedent (p > q ≡ ~p | q), ``&`` and ``|`` keep it."""
    if isinstance(f, str):
        return {(f, positive)}
    if f[0] == "~":
        return nnf_literals(f[1], not positive)
    left = nnf_literals(f[1], positive if f[0] != ">" else not positive)
    return left | nnf_literals(f[2], positive)


HEURISTICS = ("H1 len(A)≥len(B)", "H2 vars(B)⊆vars(A)", "H3 lits(B*)⊆lits(A*)", "H4 more ∨/→ in B")


def formula_stats(f) -> Tuple[int, frozenset, int]:
    """What the heuristics look at in one formula tree: (length, NNF literals, #(|) + #(>) − #(&))."""
    s = to_string(f)
    return formula_length(f), frozenset(nnf_literals(f)), s.count("|") + s.count(">") - s.count("&")


def heuristics_from_stats(sa, sb) -> Tuple[int, int, int, int]:
    """H1-H4 predictions ('A entails B' = 1) from ``formula_stats`` of A and of B."""
    (len_a, lits_a, weak_a), (len_b, lits_b, weak_b) = sa, sb
    h1 = int(len_a >= len_b)
    h2 = int({v for v, _ in lits_b} <= {v for v, _ in lits_a})
    h3 = int(lits_b <= lits_a)
    h4 = int(weak_b > weak_a)
    return h1, h2, h3, h4


def heuristic_predictions(ex: Example) -> Tuple[int, int, int, int]:
    """Predict 'A entails B' from surface statistics.  H1-H3 are Evans et al.'s (README of
    google-deepmind/logical-entailment-dataset; ``Main.hs`` heuristic_1..3): H1 length(A) >= length(B),
    H2 vars(B) ⊆ vars(A), H3 literals(B*) ⊆ literals(A*) with X* the negation normal form of X.
    H4 is ours: B has more weakening connectives than A, #(|) + #(>) − #(&)."""
    return heuristics_from_stats(formula_stats(parse_formula(ex.a)), formula_stats(parse_formula(ex.b)))


def heuristic_accuracy(examples: Sequence[Example]) -> Tuple[float, ...]:
    """Accuracy (%) of H1-H4 (``HEURISTICS``) on the examples."""
    if not examples:
        return (float("nan"),) * len(HEURISTICS)
    hits = [0] * len(HEURISTICS)
    for ex in examples:
        for i, p in enumerate(heuristic_predictions(ex)):
            hits[i] += int(p == ex.label)
    return tuple(100.0 * h / len(examples) for h in hits)


def joint_heuristic_accuracy(train: Sequence[Example], examples: Sequence[Example]) -> float:
    """A stronger baseline than H1-H4 alone: the majority label of each of the 16 joint (H1..H4)
    patterns, counted on ``train`` (ties and unseen patterns predict 1), scored on ``examples`` (%)."""
    counts: Dict[Tuple[int, ...], List[int]] = {}
    for ex in train:
        counts.setdefault(heuristic_predictions(ex), [0, 0])[ex.label] += 1
    rule = {pattern: int(c[1] >= c[0]) for pattern, c in counts.items()}
    if not examples:
        return float("nan")
    hits = sum(rule.get(heuristic_predictions(ex), 1) == ex.label for ex in examples)
    return 100.0 * hits / len(examples)
