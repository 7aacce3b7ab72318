"""FOLNet models with --folnet-trans-impl triton (Triton interpreter on CPU) vs torch.

The interpreter must be switched on before triton is imported, so the check runs
in a fresh process.  It covers the self kinds (causal LM, prefix LM, with
padding), incremental rows (query_offset) and the encoder-decoder kind, forward
and gradients.
"""
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent('''
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, sys.argv[1])
    import torch
    from nesyseq.triton_kernels import trans_triton as tt
    if not (tt.triton_available() and tt.interpreter_usable()):
        print("SKIP"); sys.exit(0)
    from folnet_helpers import build, random_tokens
    torch.set_num_threads(1)

    def pair(arch, **kw):
        torch.manual_seed(0)
        a, d = build(arch, folnet_trans_impl="torch", dropout=0.0, **kw)
        torch.manual_seed(0)
        b, _ = build(arch, folnet_trans_impl="triton", dropout=0.0, **kw)
        return a.float(), b.float(), d

    def check(out_a, out_b, ma, mb):
        torch.testing.assert_close(out_b, out_a, rtol=1e-4, atol=1e-5)
        out_a.float().pow(2).mean().backward(); out_b.float().pow(2).mean().backward()
        ga = dict(ma.named_parameters()); n = 0
        for k, p in mb.named_parameters():
            if p.grad is not None:
                torch.testing.assert_close(p.grad, ga[k].grad, rtol=1e-3, atol=1e-5); n += 1
        assert n > 0

    g = torch.Generator().manual_seed(0)
    # causal LM with right padding
    a, b, d = pair("folnet_lm_tiny", folnet_ops=".t")
    x = random_tokens(d, 2, 7, g); x[1, 5:] = d.pad()
    check(a(x)[0], b(x)[0], a, b)
    # prefix LM, left-padded source
    a, b, d = pair("folnet_lm_tiny", folnet_ops="j.t")
    src = random_tokens(d, 2, 5, g); src[1, :2] = d.pad(); prev = random_tokens(d, 2, 4, g)
    check(a(src, None, prev)[0], b(src, None, prev)[0], a, b)
    # incremental rows
    with torch.no_grad():
        sa, sb = {}, {}
        for i in range(prev.size(1)):
            oa, _ = a.decoder(prev[:, :i + 1], incremental_state=sa, src_prefix=src)
            ob, _ = b.decoder(prev[:, :i + 1], incremental_state=sb, src_prefix=src)
            torch.testing.assert_close(ob[:, -1], oa[:, -1], rtol=1e-4, atol=1e-5)
    # encoder-decoder (encoder: kind none with padding; decoder: encdec)
    a, b, d = pair("folnet_transformer_tiny", folnet_ops="j.t")
    check(a(src, None, prev)[0], b(src, None, prev)[0], a, b)
    print("OK")
''')


@pytest.mark.slow
def test_folnet_with_triton_trans_matches_torch(tmp_path):
    from tests.folnet_helpers import run_on_triton_interpreter

    run_on_triton_interpreter(tmp_path, SCRIPT, Path(__file__).resolve().parent)
