#!/usr/bin/env python
"""Mutation check of the official-checkpoint equivalence test (docs/folnet.md).

    python tests/reference/mutate_folnet_official.py

Applies each mutation below alone to the source (restoring the file afterwards,
also on errors), runs
tests/test_folnet_official_checkpoint.py::test_converted_model_reproduces_official_outputs
and prints whether the test caught it.  Every line should say "caught".
Names starting with "swap" exchange the two strings.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEST = "tests/test_folnet_official_checkpoint.py::test_converted_model_reproduces_official_outputs"
MUTATIONS = [  # (name, file, original, mutated)
    ('swap writers j/m', 'converters/folnet_official.py',
     'lin(f"{p}.writers.j", f"{src}.writer", D1, D1)',
     'lin(f"{p}.writers.m", f"{src}.writer", D1, D1)'),
    ('rel-pos: from/to [CLS] ids swapped', 'plugins/layers/folnet_rpe.py',
     '    return 2 * clip + 1\n',
     '    return 2 * clip\n'),
    ('rel-pos: [CLS]->[CLS] separate id (old map)', 'plugins/layers/folnet_rpe.py',
     '        ids = torch.where(~t0 & tau0, torch.full_like(ids, to_cls_id(clip)), ids)\n',
     '        ids = torch.where(~t0 & tau0, torch.full_like(ids, to_cls_id(clip)), ids)\n'
     '        ids = torch.where(t0 & tau0, torch.full_like(ids, cross_id(clip)), ids)\n'),
    ('pooler without tanh', 'plugins/models/folnet.py',
     'return self.pooler_activation(self.pooler(features[:, 0, :]))',
     'return self.pooler(features[:, 0, :])'),
    ('assoc halves swapped', 'converters/folnet_official.py',
     'out[f"{p}.ops.a.kernel.weight"], out[f"{p}.ops.a.premise.weight"] = w[:D1], w[D1:]',
     'out[f"{p}.ops.a.kernel.weight"], out[f"{p}.ops.a.premise.weight"] = w[D1:], w[:D1]'),
    ('trans halves swapped', 'converters/folnet_official.py',
     'w[:D2], w[D2:]',
     'w[D2:], w[:D2]'),
    ('segments: roberta rule', 'converters/folnet_official.py',
     '"folnet_segments": "bert",',
     '"folnet_segments": "roberta",'),
    ('MLM head LN eps 1e-5', 'plugins/models/folnet.py',
     'self.ln = layer_norm(dim)',
     'self.ln = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=False)'),
    ('cjoin over columns in the encoder', 'plugins/layers/folnet_layer.py',
     'rows = mask.trans.kind == "none" and ok.shape[1] == ok.shape[2]',
     'rows = False'),
    ('binary bool reads u2(x,y) twice', 'plugins/layers/folnet_layer.py',
     'return u2n.transpose(1, 2) * both',
     'return u2n * both'),
    ('embedding rows not re-indexed', 'converters/folnet_official.py',
     'out["encoder.core.embed_tokens.weight"] = word[idx]',
     'out["encoder.core.embed_tokens.weight"] = word'),
    ('MLM bias not re-indexed', 'converters/folnet_official.py',
     'read("cls.heads.predictions.bias", (V,))[idx]',
     'read("cls.heads.predictions.bias", (V,))'),
    ('SOP bias dropped', 'converters/folnet_official.py',
     'read("cls.heads.seq_relationship.bias", (n,))',
     'read("cls.heads.seq_relationship.bias", (n,)) * 0'),
    ('no type embedding', 'plugins/models/folnet_common.py',
     'u1 = self.embed_tokens(tokens) + self.embed_types(types)',
     'u1 = self.embed_tokens(tokens)'),
]


def main() -> int:
    missed = 0
    for name, rel, a, b in MUTATIONS:
        path = REPO / rel
        src = path.read_text()
        if src.count(a) < 1 or (name.startswith("swap") and src.count(b) != 1):
            print(f"{name}: pattern not found in {rel} (update this script)")
            missed += 1
            continue
        backup = Path(tempfile.mkstemp(suffix=".bak")[1])
        shutil.copy(path, backup)
        try:
            if name.startswith("swap"):
                new = src.replace(a, "@@TMP@@").replace(b, a).replace("@@TMP@@", b)
            else:
                new = src.replace(a, b)
            path.write_text(new)
            r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", "-x", TEST], cwd=REPO,
                               capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
            caught = r.returncode != 0
            missed += not caught
            print(f"{name}: {'caught' if caught else 'NOT CAUGHT'}", flush=True)
        finally:
            shutil.copy(backup, path)
            backup.unlink()
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
