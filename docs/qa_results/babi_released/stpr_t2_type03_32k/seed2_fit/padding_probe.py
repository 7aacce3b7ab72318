"""Padding probe (2026-11-27, nineteenth session): one checkpoint on one bAbI file, batch 256 against
batch 1; for each question whose answer flips, its top-2 probabilities alone and the largest
probability difference against a batch of its 256 neighbours (a different padding).
Usage: python padding_probe.py CKPT BABI_FILE DATA_BIN   (repository root on PYTHONPATH)"""
import sys, torch
from nesyseq.evaluations.qa_external import evaluate_babi_file, load_with_words
from nesyseq.data_prep.qa_babi import parse_babi_file
from fairseq.data import LanguagePairDataset
ck, f, data = sys.argv[1:4]
a = evaluate_babi_file(ck, f, data, batch_size=256, predictions=True)
b = evaluate_babi_file(ck, f, data, batch_size=1, predictions=True)
ex = parse_babi_file(f, a["memory_size"])
flips = [i for i, (x, y) in enumerate(zip(a["predictions"], b["predictions"])) if x != y]
print("errors batched", a["error"], "single", b["error"], "flips", len(flips), flips, flush=True)
words = []
for e in ex:
    words += e.source_tokens() + [e.answer]
model, task, _, _ = load_with_words(ck, list(dict.fromkeys(words)), data)
d = task.source_dictionary
def probs(idx_list):
    src = [d.encode_line(" ".join(ex[i].source_tokens()), add_if_not_exist=False, append_eos=True).long() for i in idx_list]
    ds = LanguagePairDataset(src, torch.tensor([len(s) for s in src]), d, None, None, d, left_pad_source=False)
    s = ds.collater([ds[i] for i in range(len(src))])
    net = dict(s["net_input"]); net["prev_output_tokens"] = torch.full((len(src), 1), d.eos(), dtype=torch.long)
    with torch.no_grad():
        p = model.get_normalized_probs(model(**net), log_probs=False)[:, 0]
    order = s["id"].argsort()
    return p[order]
for i in flips[:10]:
    p1 = probs([i])[0]
    near = [j for j in range(max(0, i - 128), min(len(ex), i + 128))]
    pb = probs(near)[near.index(i)]
    print("max |p_single - p_batched| over the vocabulary", float((p1 - pb).abs().max()))
    top = p1.topk(2)
    print(i, "answer", ex[i].answer, "single", b["predictions"][i], "batched", a["predictions"][i],
          "top2", [(d[int(k)], float(v)) for v, k in zip(top.values, top.indices)], "gap", float(top.values[0]-top.values[1]))
