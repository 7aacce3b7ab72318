"""Read a `fairseq-generate` log into source, target and hypothesis strings by sample id."""
import sys


def read_log(path):
    """-> (S, T, H): dicts id -> text of the S-, T- and H- lines (H without its score)."""
    s, t, h = {}, {}, {}
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if line.startswith("S-"):
                s[p[0][2:]] = p[1]
            elif line.startswith("T-"):
                t[p[0][2:]] = p[1]
            elif line.startswith("H-"):
                h[p[0][2:]] = p[2]
    if not s:
        sys.exit(f"{path}: no S- lines (not a fairseq-generate log?)")
    return s, t, h
