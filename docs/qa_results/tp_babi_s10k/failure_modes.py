"""Task-1 failure modes from a fairseq-generate log (S-/T-/H- lines), by how often the asked person
is mentioned: right, an earlier room of that person, or a room of someone else.
Usage: python failure_modes.py GENERATE_LOG"""
import collections, pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))
from nesyseq.common.generate_output import read_generate_output  # noqa: E402
RECS = read_generate_output(pathlib.Path(sys.argv[1]))
if not RECS: sys.exit(f"{sys.argv[1]}: no S-/T-/H- lines (not a fairseq-generate log?)")
S, T, H = ({k: r[x] for k, r in RECS.items()} for x in "STH")
stats = collections.Counter()
for k in S:
    toks = S[k].split(); q = toks[-2]
    sents = ' '.join(toks).split(' . ')
    locs = [s.split()[-1] for s in sents[:-1] if s.split()[0] == q]
    n = min(len(locs), 3)
    ok = H[k] == T[k]
    kind = 'ok' if ok else ('earlier room of that person' if H[k] in locs else 'room of someone else')
    stats[(n, kind)] += 1
tot = collections.Counter()
for (n, kind), c in stats.items(): tot[n] += c
for key in sorted(stats): print(f"mentions {key[0]}{'+' if key[0]==3 else ''}: {key[1]:30s} {stats[key]:5d} ({100*stats[key]/tot[key[0]]:.1f}%)")
