"""``tpru`` encoder-decoder: incremental decoding == full forward; tiny fairseq-train / fairseq-generate."""
import subprocess

import pytest
import torch
from fairseq.data import Dictionary

from nesyseq import plugins  # noqa: F401
from nesyseq.common.fairseq_cli import USER_DIR, fairseq_bin, small_cpu_env
from nesyseq.plugins.models.tpru_seq2seq import TPRUDecoder, TPRUEncoder, TPRUSeq2SeqConfig


def build(seed=0):
    torch.manual_seed(seed)
    d = Dictionary()
    for c in "abcdefgh":
        d.add_symbol(c)
    cfg = TPRUSeq2SeqConfig(embed_dim=12, hidden_dim=10, num_roles=6, dropout=0.0)
    return d, TPRUEncoder(cfg, d).eval(), TPRUDecoder(cfg, d).eval()


def test_incremental_equals_full_forward_and_reorder():
    d, enc, dec = build()
    pad = d.pad()
    src = torch.randint(4, len(d), (3, 7))
    src[1, :2] = pad                                      # left padding, as translation batches
    prev = torch.randint(4, len(d), (3, 5))
    eo = enc(src)
    full, extra = dec(prev, eo)
    state = {}
    steps = [dec(prev[:, : t + 1], eo, incremental_state=state)[0] for t in range(prev.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full)
    assert torch.allclose(extra["attn"][0][1, :, :2], torch.zeros(()))   # no attention on padding
    # reorder: beams permuted mid-sequence give the permuted continuation
    order = torch.tensor([2, 0, 1])
    state2 = {}
    for t in range(3):
        dec(prev[:, : t + 1], eo, incremental_state=state2)
    dec.reorder_incremental_state_scripting(state2, order)
    eo2 = enc.reorder_encoder_out(eo, order)
    nxt = dec(prev[order][:, :4], eo2, incremental_state=state2)[0]
    torch.testing.assert_close(nxt, full[order][:, 3:4])


def test_gradients_flow():
    d, enc, dec = build(1)
    src = torch.randint(4, len(d), (2, 5))
    out, _ = dec(torch.randint(4, len(d), (2, 4)), enc(src))
    out.logsumexp(-1).sum().backward()
    for m in (enc, dec):
        for n, p in m.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, n


@pytest.mark.slow
def test_fairseq_train_and_generate(tmp_path):
    import random
    rng = random.Random(0)
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, n in (("train", 200), ("valid", 20), ("test", 10)):
        src = [" ".join(rng.choice("abcde") for _ in range(rng.randint(2, 6))) for _ in range(n)]
        (raw / f"{split}.src").write_text("\n".join(src) + "\n")
        (raw / f"{split}.tgt").write_text("\n".join(" ".join(reversed(s.split())) for s in src) + "\n")
    env = small_cpu_env()
    env["PYTHONPATH"] = str(USER_DIR.parent)
    run = lambda cmd: subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    r = run([fairseq_bin("fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt",
             "--trainpref", str(raw / "train"), "--validpref", str(raw / "valid"), "--testpref", str(raw / "test"),
             "--destdir", str(tmp_path / "bin"), "--joined-dictionary", "--workers", "1"])
    assert r.returncode == 0, r.stderr[-2000:]
    r = run([fairseq_bin("fairseq-train"), "--user-dir", str(USER_DIR), str(tmp_path / "bin"), "--task", "translation",
             "--arch", "tpru_tiny", "--optimizer", "adam", "--lr", "3e-3", "--max-tokens", "800", "--max-update", "10",
             "--criterion", "cross_entropy", "--save-dir", str(tmp_path / "ck"), "--no-progress-bar", "--cpu",
             "--no-epoch-checkpoints"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "tpru: recurrent params" in r.stdout + r.stderr
    r = run([fairseq_bin("fairseq-generate"), "--user-dir", str(USER_DIR), str(tmp_path / "bin"),
             "--path", str(tmp_path / "ck" / "checkpoint_last.pt"), "--beam", "3", "--batch-size", "8", "--cpu"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert sum(line.startswith("H-") for line in r.stdout.splitlines()) == 10
