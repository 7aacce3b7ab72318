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
    from data_prep.math_generate import atomic_write_bytes

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


def _pair_group(rng, spec: SplitSpec, tries: int = 400):
    """One balanced group: a fixed formula X and two partners of identical shape and variable set,
    one entailed and one not. Alternates which side is fixed. Returns [(A,B,1),(A,B,0)] or None."""
    k = rng.randint(min(2, spec.max_vars), spec.max_vars)
    pool = rng.sample(LETTERS, k)
    order = sorted(pool)
    lo = max(spec.min_ops, k - 1)
    hi = max(lo, spec.max_ops)
    ops_x, ops_y = rng.randint(lo, hi), rng.randint(lo, hi)
    neg_x, neg_y = rng.randint(0, 1 + ops_x // 3), rng.randint(0, 1 + ops_y // 3)
    x = random_formula(rng, pool, ops_x, neg_x)
    tx = truth_table(x, order)
    full = (1 << (1 << k)) - 1
    fixed_left = rng.random() < 0.5
    if fixed_left and tx == 0 or not fixed_left and tx == full:
        return None                             # everything entails / is entailed: no negative
    pos = neg = None
    for _ in range(tries):
        y = random_formula(rng, pool, ops_y, neg_y)
        ty = truth_table(y, order)
        ok = (tx & ~ty & full) == 0 if fixed_left else (ty & ~tx & full) == 0
        if ok and pos is None:
            pos = y
        elif not ok and neg is None:
            neg = y
        if pos is not None and neg is not None:
            break
    if pos is None or neg is None:
        return None
    xs = to_string(x)
    if fixed_left:
        return [(xs, to_string(pos), 1), (xs, to_string(neg), 0)]
    return [(to_string(pos), xs, 1), (to_string(neg), xs, 0)]


def generate_splits(specs: Dict[str, SplitSpec] = DEFAULT_SPECS, seed: int = 0) -> Dict[str, List[Example]]:
    """All splits; no (A, B) pair occurs twice (within or across splits); classes balanced."""
    rng = random.Random(seed)
    seen = set()
    out = {}
    for split, spec in specs.items():
        exs: List[Example] = []
        misses = 0
        while len(exs) < spec.size:
            grp = _pair_group(rng, spec)
            if grp is None or any((a, b) in seen for a, b, _ in grp):
                misses += 1
                if misses > 200 * spec.size + 1000:
                    raise RuntimeError(f"generator: cannot fill split {split} ({len(exs)}/{spec.size})")
                continue
            for a, b, e in grp:
                seen.add((a, b))
                exs.append(Example(a, b, e))
        exs = exs[:spec.size]                 # an odd size drops one example of the last group
        rng.shuffle(exs)
        out[split] = exs
    return out


# ---- heuristic baselines --------------------------------------------------------------------------
def _len(f: str) -> int:
    return len(f)


def heuristic_predictions(ex: Example) -> Tuple[int, int, int]:
    """H1: vars(B) ⊆ vars(A) -> entails.  H2: len(B) <= len(A) -> entails (weaker consequent is
    shorter).  H3: B has more weakening operators (|, >) than A -> entails."""
    va, vb = set(c for c in ex.a if c.isalpha()), set(c for c in ex.b if c.isalpha())
    h1 = int(vb <= va)
    h2 = int(_len(ex.b) <= _len(ex.a))
    weak = lambda s: s.count("|") + s.count(">") - s.count("&")
    h3 = int(weak(ex.b) > weak(ex.a))
    return h1, h2, h3


def heuristic_accuracy(examples: Sequence[Example]) -> Tuple[float, float, float]:
    if not examples:
        return (float("nan"),) * 3
    hits = [0, 0, 0]
    for ex in examples:
        for i, p in enumerate(heuristic_predictions(ex)):
            hits[i] += int(p == ex.label)
    return tuple(100.0 * h / len(examples) for h in hits)
