"""Crafted entity-dropout masks on the original test set (scratch diagnostic): does the semantic
path of an stpr trained with entity dropout handle a dropped answer when (a) only the answer word
is dropped, (b) every room word of the story is dropped (test_rooms' situation)?"""
import os, sys, torch
from fairseq import checkpoint_utils
from nesyseq import plugins
import nesyseq.plugins.models.qa_tpr as qt
from nesyseq.plugins.layers import symbolic as S

cap = {}
orig = S.symbolic_output_probs
def spy(sem_logits, h_sym, symbols, beta_logit, unseen=None):
    cap["sem"] = torch.softmax(sem_logits.float(), -1)[:, 0]
    cap["sym"] = orig(sem_logits, h_sym, symbols, torch.tensor(-1e4), unseen)[:, 0]
    return orig(sem_logits, h_sym, symbols, beta_logit, unseen)
qt.symbolic_output_probs = spy

data = sys.argv[1]
for ck in sys.argv[2:]:
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([ck], arg_overrides={"data": data})
    model = models[0]
    enc = model.encoder
    model.train(); enc.dropout.p = 0.0
    if os.environ.get("IA") == "1":         # the dropped words' α read 1/2, as an unseen word's
        from omegaconf import open_dict
        with open_dict(enc.cfg):
            enc.cfg.entity_dropout_init_alpha = True
    d = task.source_dictionary
    task.load_dataset("train"); tr = task.dataset("train")
    rooms = sorted({int(tr[i]["target"][0]) for i in range(len(tr))})
    SUB = __import__("os").environ.get("SUB", "test"); task.load_dataset(SUB); ds = task.dataset(SUB)
    beta = torch.sigmoid(enc.beta_logit).item()
    for mode in __import__("os").environ.get("MODES", "none answer rooms rooms_but_answer").split():
        st = dict(mix=0, sem=0, sym=0, pg=0.0); n = 0
        with torch.no_grad():
            for i0 in range(0, len(ds), 250):
                s = ds.collater([ds[i] for i in range(i0, min(len(ds), i0 + 250))])
                src = s["net_input"]["src_tokens"]; g = s["target"][:, 0]
                drop = torch.zeros(src.size(0), len(d), dtype=torch.bool)
                if mode == "answer":
                    drop[torch.arange(len(g)), g] = True
                elif mode == "unseen":
                    for r in enc.A.unseen.nonzero()[:, 0].tolist():
                        drop[:, r] = (src == r).any(-1)
                elif mode.startswith("rooms"):
                    for r in rooms:
                        drop[:, r] = (src == r).any(-1)
                    if mode == "rooms_but_answer":
                        drop[torch.arange(len(g)), g] = False
                enc.entity_dropout_mask = (lambda *a, _m=drop if mode != "none" else None, **k: _m)
                out = model(**s["net_input"])
                p = model.get_normalized_probs(out, log_probs=False)[:, 0]
                st["mix"] += int(p.argmax(-1).ne(g).sum()); st["sem"] += int(cap["sem"].argmax(-1).ne(g).sum())
                st["sym"] += int(cap["sym"].argmax(-1).ne(g).sum()); st["pg"] += float(cap["sem"].gather(1, g[:, None]).sum())
                n += len(g)
        print(f"{ck.split('/')[-4]}/{ck.split('/')[-2]} beta={beta:.3f} {SUB} ia={os.environ.get('IA', '0')} drop={mode:17s} err mix={100*st['mix']/n:5.1f} sem={100*st['sem']/n:5.1f} sym={100*st['sym']/n:5.1f} p_sem(gold)={st['pg']/n:.3f}", flush=True)
