"""Incremental decoding checks shared by the seq2seq model tests."""
import torch


def incremental_outputs(model, prev, enc):
    """Decoder outputs fed one prefix step at a time with a cache, concatenated over time:
    equals ``model.decoder(prev, encoder_out=enc)`` when the cache is right."""
    inc, steps = {}, []
    for t in range(prev.size(1)):
        steps.append(model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=inc)[0])
    return torch.cat(steps, 1)


def reorder_mid_sequence(model, prev, enc, order, steps):
    """Beam search's move: decode ``steps`` tokens with a cache, reorder the cache and the
    encoder output by ``order``, decode one more step.  -> (that step's output, the same step
    of a full forward of the reordered rows, the reordered encoder output)."""
    inc = {}
    for t in range(steps):
        model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=inc)
    model.decoder.reorder_incremental_state_scripting(inc, order)
    enc2 = model.encoder.reorder_encoder_out(enc, order)
    prev2 = prev[order][:, : steps + 1]
    out, _ = model.decoder(prev2, encoder_out=enc2, incremental_state=inc)
    full2, _ = model.decoder(prev2, encoder_out=enc2)
    return out[:, -1], full2[:, -1], enc2
