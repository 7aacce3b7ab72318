"""Triton kernels for FOLNet's masked trans operator (no wrappers here).

    u_h(x, y) = sum_a softmax_{allowed a}( K_h(x, ·) )[a] * v_h(a, y)

This module holds only ``@triton.jit`` functions.  ``trans_triton.py`` loads it
(once per mode: compiled, or a second copy decorated under the Triton
interpreter) and launches the kernels.

Index names used throughout (one (batch b, head h) pair per program column):
    x   kernel / output row, relative index in [0, Tq); absolute x_abs = x + q_off
    a   the reduced axis.  For the self kinds a = j in [0, T).  For ``encdec``
        the axis is [encoder I ; decoder T]: a in [0, Ti) is an encoder column,
        a = Ti + j a decoder column j in [0, Tt).
    y   output / premise column in [0, Y); Y = T (self) or Ti + Tt (encdec)

Mask kinds (constexpr KIND): 0 none, 1 causal, 2 prefix, 3 encdec.  With
rel(i, j) = True (none) | j <= i (causal, encdec-decoder) | j <= i or j < P (prefix):
    kernel  K(x, j)  kept iff valid(x) & valid(j) & rel(x_abs, j)
    premise v(j, y)  kept iff valid(j) & valid(y) & rel(j, y)
    encdec: K(x, a in I) kept iff valid(x) & enc_valid(a); premise (a in I, y in I)
            is v_enc kept iff enc_valid(a) & enc_valid(y); (a in I, y in T) is 0;
            (j in T, y in I) is v kept iff valid(j) & enc_valid(y).

Softmax statistics depend only on (x, a) while the a-range a program needs
depends on its y-block (causal: y <= a <= x), so the row log-sum-exp is computed
once in a first pass (``_lse_kernel``) over every allowed a.  The main pass then
uses p = exp(K - lse) directly: no running rescale, identical normaliser for every
y-block, and the same lse is what backward needs.  All reductions run in a fixed
order inside one program and no atomics are used, so results are deterministic
for a given input and block configuration.

Masked kernel entries are loaded as -inf, so p = exp2(-inf - lse) = 0 without a
separate select; lse of a row with no allowed a is stored as 0 (finite), so such
rows give exact zeros and never NaN.
"""
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _rel(i, j, P, KIND: tl.constexpr):
    """rel(i, j) on broadcastable index tensors (see module doc)."""
    if KIND == 0:
        r = (i >= 0) & (j >= 0)
    elif KIND == 2:
        r = (j <= i) | (j < P)
    else:
        r = j <= i
    return r


@triton.jit
def _valid(VALID, b, idx, n, HAS_PAD: tl.constexpr):
    """valid(idx) for a (B, n) int8 validity table; False outside [0, n)."""
    inb = (idx >= 0) & (idx < n)
    if HAS_PAD:
        ok = tl.load(VALID + b * n + idx, mask=inb, other=0) != 0
        ok = ok & inb
    else:
        ok = inb
    return ok


@triton.jit
def _bounds(LO, HI, b, n, HAS_PAD: tl.constexpr):
    """[lo, hi): the per-batch span holding every valid position (tile skipping)."""
    if HAS_PAD:
        lo = tl.load(LO + b)
        hi = tl.load(HI + b)
    else:
        lo = 0
        hi = n
    return lo, hi


@triton.jit
def _span_ok(SPAN, b, HAS_PAD: tl.constexpr):
    """True when batch row b's valid positions are exactly its span [lo, hi)
    (padding only at the ends): tiles inside the span then need no validity mask."""
    if HAS_PAD:
        ok = tl.load(SPAN + b) != 0
    else:
        ok = True
    return ok


@triton.jit
def _enc_dec_cols_ok(y_first, y_last, Ti, elo, ehi, dlo, dhi):
    """Whole concatenated column block [y_first, y_last] valid (encdec): encoder part
    inside [elo, ehi), decoder part inside Ti + [dlo, dhi)."""
    enc_ok = (y_first >= Ti) | ((y_first >= elo) & (tl.minimum(y_last, Ti - 1) < ehi))
    dec_ok = (y_last < Ti) | ((tl.maximum(y_first, Ti) - Ti >= dlo) & (y_last - Ti < dhi))
    return enc_ok & dec_ok


@triton.jit
def _prefix_len(PLEN, b, KIND: tl.constexpr):
    if KIND == 2:
        P = tl.load(PLEN + b)
    else:
        P = 0
    return P


@triton.jit
def _kernel_hi(x_last_abs, P, n, KIND: tl.constexpr):
    """Exclusive upper bound on self/decoder columns j that rows <= x_last_abs may use."""
    if KIND == 0:
        hi = n
    elif KIND == 2:
        hi = tl.minimum(tl.maximum(x_last_abs + 1, P), n)
    else:
        hi = tl.minimum(x_last_abs + 1, n)
    return hi


@triton.jit
def _tile_and_bh(n_tiles):
    """Decode the flat program id: (tile index, b*H + h).

    The grid is 1-D, n_tiles * B * H programs (grid axis 0 holds up to 2^31 - 1
    programs; axes 1 and 2 only 65535, too few for B * D2 = 1024 * 64).  The tile
    index varies fastest, so the programs running at once are the tiles of a few
    (b, h) matrices and share their K rows and premise columns in L2."""
    pid = tl.program_id(0)
    return pid % n_tiles, pid // n_tiles


# --------------------------------------------------------------------------
# Pass 1: row log-sum-exp (base 2) over every allowed a.  grid (cdiv(Tq, BX) * B*H,)
# --------------------------------------------------------------------------
@triton.jit
def _lse_kernel(K, LSE, DVALID, EVALID, DLO, DHI, ELO, EHI, PLEN,
                sKb, sKh, sKx, sKa,
                H, Tq, Ti, Tt, q_off,
                KIND: tl.constexpr, HAS_DPAD: tl.constexpr, HAS_EPAD: tl.constexpr,
                BX: tl.constexpr, BA: tl.constexpr):
    xb, bh = _tile_and_bh(tl.cdiv(Tq, BX))
    b = bh // H
    h = bh % H
    offs_x = xb * BX + tl.arange(0, BX)                       # (BX,)
    x_abs = offs_x + q_off
    x_ok = (offs_x < Tq) & _valid(DVALID, b, x_abs, Tt, HAS_DPAD)
    K_rows = K + b.to(tl.int64) * sKb + h.to(tl.int64) * sKh + offs_x[:, None] * sKx

    P = _prefix_len(PLEN, b, KIND)
    dlo, dhi = _bounds(DLO, DHI, b, Tt, HAS_DPAD)
    x_first = xb * BX + q_off
    x_last = tl.minimum(xb * BX + BX, Tq) - 1 + q_off
    rows_live = (x_last >= dlo) & (x_first < dhi)

    m = tl.full([BX], float("-inf"), tl.float32)
    l = tl.zeros([BX], tl.float32)
    if KIND == 3:
        # encoder columns a in [elo, ehi)
        elo, ehi = _bounds(ELO, EHI, b, Ti, HAS_EPAD)
        a_lo = (elo // BA) * BA
        a_hi = tl.where(rows_live, ehi, a_lo)
        for a0 in range(a_lo, a_hi, BA):
            offs_a = a0 + tl.arange(0, BA)
            kok = x_ok[:, None] & _valid(EVALID, b, offs_a, Ti, HAS_EPAD)[None, :]
            k = tl.load(K_rows + offs_a[None, :] * sKa, mask=kok, other=float("-inf")).to(tl.float32) * LOG2E
            m_new = tl.maximum(m, tl.max(k, 1))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            l = l * tl.exp2(m - m_use) + tl.sum(tl.exp2(k - m_use[:, None]), 1)
            m = m_new
    # self / decoder columns j
    j_lo = (dlo // BA) * BA
    j_hi = tl.minimum(_kernel_hi(x_last, P, Tt, KIND), dhi)
    j_hi = tl.where(rows_live, j_hi, j_lo)
    for j0 in range(j_lo, j_hi, BA):
        offs_j = j0 + tl.arange(0, BA)
        kok = x_ok[:, None] & _valid(DVALID, b, offs_j, Tt, HAS_DPAD)[None, :] \
            & _rel(x_abs[:, None], offs_j[None, :], P, KIND)
        k = tl.load(K_rows + (Ti + offs_j)[None, :] * sKa, mask=kok, other=float("-inf")).to(tl.float32) * LOG2E
        m_new = tl.maximum(m, tl.max(k, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        l = l * tl.exp2(m - m_use) + tl.sum(tl.exp2(k - m_use[:, None]), 1)
        m = m_new
    lse = tl.where(l > 0, m + tl.log2(tl.where(l > 0, l, 1.0)), 0.0)
    tl.store(LSE + bh * Tq + offs_x, lse, mask=offs_x < Tq)


@triton.jit
def _fwd_step(acc, K_rows, V_cols, a0, k_col0, lse, x_ok, x_abs, y_ok, offs_y, P, b, VALID, Ti, n_a,
              sKa, sVa, REL: tl.constexpr, HAS_PAD: tl.constexpr, BA: tl.constexpr, DOT_PREC: tl.constexpr,
              MASKED: tl.constexpr):
    """acc += exp2(K log2e - lse) @ Vm for premise rows a0 .. a0+BA (K columns k_col0 + a).

    REL: relation for the kernel (x, a) and the premise (a, y) entries: 0 none
    (encoder segment: validity only), else the mask kind (3: decoder segment of
    encdec, where premise columns y < Ti are encoder columns, always related).
    MASKED=False is for interior tiles: plain loads, no mask arithmetic.
    """
    offs_a = a0 + tl.arange(0, BA)
    K_ptrs = K_rows + (k_col0 + offs_a)[None, :] * sKa                            # (BX, BA)
    V_ptrs = V_cols + offs_a[:, None] * sVa                                       # (BA, BY)
    if MASKED:
        a_ok = _valid(VALID, b, offs_a, n_a, HAS_PAD)
        kok = x_ok[:, None] & a_ok[None, :] & _rel(x_abs[:, None], offs_a[None, :], P, REL)
        k = tl.load(K_ptrs, mask=kok, other=float("-inf")).to(tl.float32)
        if REL == 3:
            vrel = (offs_y < Ti)[None, :] | ((offs_y - Ti)[None, :] <= offs_a[:, None])
        else:
            vrel = _rel(offs_a[:, None], offs_y[None, :], P, REL)
        vt = tl.load(V_ptrs, mask=a_ok[:, None] & y_ok[None, :] & vrel, other=0.0)
    else:
        k = tl.load(K_ptrs).to(tl.float32)
        vt = tl.load(V_ptrs)
    p = tl.exp2(k * LOG2E - lse[:, None])                                         # (BX, BA)
    return tl.dot(p.to(vt.dtype), vt, acc, input_precision=DOT_PREC)


# --------------------------------------------------------------------------
# Pass 2: O(x, y) = sum_a exp2(K(x,a) log2e - lse(x)) Vm(a, y).
# grid (cdiv(Tq, BX) * cdiv(Y, BY) * B*H,); each program owns one (x, y) tile and
# loops only over the a-blocks its masks can reach.
# --------------------------------------------------------------------------
@triton.jit
def _fwd_kernel(K, V, VE, O, LSE, DVALID, EVALID, DLO, DHI, ELO, EHI, PLEN, DSPAN, ESPAN,
                sKb, sKh, sKx, sKa,
                sVb, sVh, sVa, sVy,
                sEb, sEh, sEa, sEy,
                sOb, sOh, sOx, sOy,
                H, Tq, Ti, Tt, q_off,
                KIND: tl.constexpr, HAS_DPAD: tl.constexpr, HAS_EPAD: tl.constexpr,
                BX: tl.constexpr, BY: tl.constexpr, BA: tl.constexpr,
                DOT_PREC: tl.constexpr):
    Y = Ti + Tt
    n_yb = tl.cdiv(Y, BY)
    n_xb = tl.cdiv(Tq, BX)
    pid, bh = _tile_and_bh(n_xb * n_yb)
    # last row-blocks first: under causal masks they carry the most a-blocks,
    # so the longest programs start first (shorter tail)
    xb = n_xb - 1 - pid // n_yb
    yb = pid % n_yb
    b = bh // H
    h = bh % H
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)

    offs_x = xb * BX + tl.arange(0, BX)                       # (BX,)
    offs_y = yb * BY + tl.arange(0, BY)                       # (BY,)
    x_abs = offs_x + q_off
    x_ok = (offs_x < Tq) & _valid(DVALID, b, x_abs, Tt, HAS_DPAD)
    if KIND == 3:
        y_enc = offs_y < Ti
        y_ok = tl.where(y_enc, _valid(EVALID, b, offs_y, Ti, HAS_EPAD),
                        _valid(DVALID, b, offs_y - Ti, Tt, HAS_DPAD))
    else:
        y_ok = _valid(DVALID, b, offs_y, Tt, HAS_DPAD)

    K_rows = K + b64 * sKb + h64 * sKh + offs_x[:, None] * sKx     # (BX, 1)
    V_cols = V + b64 * sVb + h64 * sVh + offs_y[None, :] * sVy                   # (1, BY)
    lse = tl.load(LSE + bh * Tq + offs_x, mask=offs_x < Tq, other=0.0)

    P = _prefix_len(PLEN, b, KIND)
    dlo, dhi = _bounds(DLO, DHI, b, Tt, HAS_DPAD)
    x_first = xb * BX + q_off
    x_last = tl.minimum(xb * BX + BX, Tq) - 1 + q_off
    y_first = yb * BY
    y_last = tl.minimum(y_first + BY, Y) - 1
    rows_live = (x_last >= dlo) & (x_first < dhi)

    # Interior blocks skip every mask computation: full x and y tiles inside the
    # valid spans of a batch row whose padding is only at the ends (or absent),
    # and an a-block on which rel is true for the whole tile.  ``even`` says
    # whether this program's x/y tile qualifies.
    elo, ehi = _bounds(ELO, EHI, b, Ti, HAS_EPAD)
    even = _span_ok(DSPAN, b, HAS_DPAD) & _span_ok(ESPAN, b, HAS_EPAD)
    even = even & (xb * BX + BX <= Tq) & (x_first >= dlo) & (x_first + BX <= dhi) & (y_first + BY <= Y)
    if KIND == 3:
        even = even & _enc_dec_cols_ok(y_first, y_last, Ti, elo, ehi, dlo, dhi)
    else:
        even = even & (y_first >= dlo) & (y_first + BY <= dhi)

    acc = tl.zeros([BX, BY], tl.float32)
    if KIND == 3:
        # Encoder columns a in I meet v_enc(a, y) for y in I only.
        a_lo = (elo // BA) * BA
        a_hi = tl.where(rows_live & (y_first < Ti), ehi, a_lo)
        VE_cols = VE + b64 * sEb + h64 * sEh + offs_y[None, :] * sEy
        # unmasked: whole a-blocks inside [elo, ehi), y-block inside I
        e_lo = tl.minimum(tl.maximum(((elo + BA - 1) // BA) * BA, a_lo), a_hi)
        e_hi = tl.maximum(tl.minimum((ehi // BA) * BA, a_hi), e_lo)
        e_lo = tl.where(even & (y_last < Ti), e_lo, a_hi)
        e_hi = tl.where(even & (y_last < Ti), e_hi, a_hi)
        for a0 in range(a_lo, e_lo, BA):
            acc = _fwd_step(acc, K_rows, VE_cols, a0, 0, lse, x_ok, x_abs, y_ok & y_enc, offs_y, P, b, EVALID,
                            Ti, Ti, sKa, sEa, 0, HAS_EPAD, BA, DOT_PREC, True)
        for a0 in range(e_lo, e_hi, BA):
            acc = _fwd_step(acc, K_rows, VE_cols, a0, 0, lse, x_ok, x_abs, y_ok, offs_y, P, b, EVALID, Ti, Ti,
                            sKa, sEa, 0, False, BA, DOT_PREC, False)
        for a0 in range(e_hi, a_hi, BA):
            acc = _fwd_step(acc, K_rows, VE_cols, a0, 0, lse, x_ok, x_abs, y_ok & y_enc, offs_y, P, b, EVALID,
                            Ti, Ti, sKa, sEa, 0, HAS_EPAD, BA, DOT_PREC, True)
        # Decoder columns: kernel needs j <= x; premise (j, y in T) needs y - Ti <= j.
        j_lo = tl.maximum(tl.maximum(y_first - Ti, 0), dlo)
        j_hi = tl.minimum(tl.minimum(x_last + 1, Tt), dhi)
        f_lo = ((tl.maximum(y_last - Ti, 0) + BA - 1) // BA) * BA
        f_hi = ((x_first + 1) // BA) * BA
    else:
        # Self columns: kernel bound from the rows, premise bound from the columns.
        if KIND == 1:
            j_lo = tl.maximum(y_first, dlo)
            f_lo = ((y_last + BA - 1) // BA) * BA
            f_hi = ((x_first + 1) // BA) * BA
        elif KIND == 2:
            j_lo = tl.maximum(tl.where(y_first < P, 0, y_first), dlo)
            f_lo = tl.where(y_last < P, 0, ((y_last + BA - 1) // BA) * BA)
            f_hi = (tl.maximum(x_first + 1, P) // BA) * BA
        else:
            j_lo = dlo
            f_lo = 0
            f_hi = Tt
        j_hi = tl.minimum(_kernel_hi(x_last, P, Tt, KIND), dhi)
        rows_live = rows_live & (y_last >= dlo) & (y_first < dhi)
    j_lo = (j_lo // BA) * BA
    j_hi = tl.where(rows_live, j_hi, j_lo)
    # [j_lo, f_lo) masked, [f_lo, f_hi) unmasked, [f_hi, j_hi) masked
    f_hi = tl.minimum(f_hi, (dhi // BA) * BA)
    f_lo = tl.maximum(f_lo, ((dlo + BA - 1) // BA) * BA)
    f_lo = tl.minimum(tl.maximum(f_lo, j_lo), j_hi)
    f_hi = tl.maximum(tl.minimum(f_hi, j_hi), f_lo)
    f_lo = tl.where(even, f_lo, j_hi)
    f_hi = tl.where(even, f_hi, j_hi)
    for j0 in range(j_lo, f_lo, BA):
        acc = _fwd_step(acc, K_rows, V_cols, j0, Ti, lse, x_ok, x_abs, y_ok, offs_y, P, b, DVALID, Ti, Tt,
                        sKa, sVa, KIND, HAS_DPAD, BA, DOT_PREC, True)
    for j0 in range(f_lo, f_hi, BA):
        acc = _fwd_step(acc, K_rows, V_cols, j0, Ti, lse, x_ok, x_abs, y_ok, offs_y, P, b, DVALID, Ti, Tt,
                        sKa, sVa, KIND, HAS_DPAD, BA, DOT_PREC, False)
    for j0 in range(f_hi, j_hi, BA):
        acc = _fwd_step(acc, K_rows, V_cols, j0, Ti, lse, x_ok, x_abs, y_ok, offs_y, P, b, DVALID, Ti, Tt,
                        sKa, sVa, KIND, HAS_DPAD, BA, DOT_PREC, True)

    O_ptrs = O + b64 * sOb + h64 * sOh + offs_x[:, None] * sOx + offs_y[None, :] * sOy
    tl.store(O_ptrs, acc.to(O.dtype.element_ty), mask=(offs_x < Tq)[:, None] & (offs_y < Y)[None, :])


# --------------------------------------------------------------------------
# Backward helper: delta(x) = sum_y dO(x, y) O(x, y).  grid (cdiv(Tq, BX) * B*H,)
# --------------------------------------------------------------------------
@triton.jit
def _delta_kernel(O, DO, DELTA,
                  sOb, sOh, sOx, sOy,
                  sGb, sGh, sGx, sGy,
                  H, Tq, Y,
                  BX: tl.constexpr, BY: tl.constexpr):
    xb, bh = _tile_and_bh(tl.cdiv(Tq, BX))
    b64 = (bh // H).to(tl.int64)
    h64 = (bh % H).to(tl.int64)
    offs_x = xb * BX + tl.arange(0, BX)
    row = offs_x[:, None]
    d = tl.zeros([BX], tl.float32)
    for y0 in range(0, Y, BY):
        offs_y = y0 + tl.arange(0, BY)
        msk = (offs_x < Tq)[:, None] & (offs_y < Y)[None, :]
        o = tl.load(O + b64 * sOb + h64 * sOh + row * sOx + offs_y[None, :] * sOy, mask=msk, other=0.0)
        g = tl.load(DO + b64 * sGb + h64 * sGh + row * sGx + offs_y[None, :] * sGy, mask=msk, other=0.0)
        d += tl.sum(o.to(tl.float32) * g.to(tl.float32), 1)
    tl.store(DELTA + bh * Tq + offs_x, d, mask=offs_x < Tq)


@triton.jit
def _dk_step(dp, DO_rows, V_rows, y0, col0, x_in, a_ok, offs_a, P, b, VALID, n_y, sGy, sVy,
             REL: tl.constexpr, HAS_PAD: tl.constexpr, BY: tl.constexpr, DOT_PREC: tl.constexpr,
             MASKED: tl.constexpr):
    """dp += dO(x, col0 + y) @ Vm(a, col0 + y)^T for y in y0 .. y0+BY (premise columns)."""
    offs_y = y0 + tl.arange(0, BY)
    G_ptrs = DO_rows + (col0 + offs_y)[None, :] * sGy                             # (BX, BY)
    V_ptrs = V_rows + (col0 + offs_y)[None, :] * sVy                              # (BA, BY)
    if MASKED:
        y_ok = _valid(VALID, b, offs_y, n_y, HAS_PAD)
        g = tl.load(G_ptrs, mask=x_in[:, None] & y_ok[None, :], other=0.0)
        vok = a_ok[:, None] & y_ok[None, :] & _rel(offs_a[:, None], offs_y[None, :], P, REL)
        vt = tl.load(V_ptrs, mask=vok, other=0.0)
    else:
        g = tl.load(G_ptrs)
        vt = tl.load(V_ptrs)
    return tl.dot(g, tl.trans(vt), dp, input_precision=DOT_PREC)


@triton.jit
def _dk_loops(dp, DO_rows, V_rows, y_lo, y_hi, f_lo, f_hi, even, col0, x_in, a_ok, offs_a, P, b, VALID, n_y,
              sGy, sVy, REL: tl.constexpr, HAS_PAD: tl.constexpr, BY: tl.constexpr, DOT_PREC: tl.constexpr):
    """y-blocks [f_lo, f_hi) unmasked when ``even``, [y_lo, f_lo) and [f_hi, y_hi) masked."""
    f_lo = tl.minimum(tl.maximum(f_lo, y_lo), y_hi)
    f_hi = tl.maximum(tl.minimum(f_hi, y_hi), f_lo)
    f_lo = tl.where(even, f_lo, y_hi)
    f_hi = tl.where(even, f_hi, y_hi)
    for y0 in range(y_lo, f_lo, BY):
        dp = _dk_step(dp, DO_rows, V_rows, y0, col0, x_in, a_ok, offs_a, P, b, VALID, n_y, sGy, sVy,
                      REL, HAS_PAD, BY, DOT_PREC, True)
    for y0 in range(f_lo, f_hi, BY):
        dp = _dk_step(dp, DO_rows, V_rows, y0, col0, x_in, a_ok, offs_a, P, b, VALID, n_y, sGy, sVy,
                      REL, HAS_PAD, BY, DOT_PREC, False)
    for y0 in range(f_hi, y_hi, BY):
        dp = _dk_step(dp, DO_rows, V_rows, y0, col0, x_in, a_ok, offs_a, P, b, VALID, n_y, sGy, sVy,
                      REL, HAS_PAD, BY, DOT_PREC, True)
    return dp


# --------------------------------------------------------------------------
# dK(x, a) = p(x, a) (dP(x, a) - delta(x)),  dP(x, a) = sum_y dO(x, y) Vm(a, y)
# grid (cdiv(Tq, BX) * cdiv(n_a, BA) * B*H,) for one column segment:
#   SEG 0: encoder columns a in [0, Ti) (encdec only), premise v_enc
#   SEG 1: self / decoder columns j, K column Ti + j, premise v
# --------------------------------------------------------------------------
@triton.jit
def _dk_kernel(K, V, VE, DO, LSE, DELTA, DK, DVALID, EVALID, DLO, DHI, ELO, EHI, PLEN, DSPAN, ESPAN,
               sKb, sKh, sKx, sKa,
               sVb, sVh, sVa, sVy,
               sEb, sEh, sEa, sEy,
               sGb, sGh, sGx, sGy,
               sDb, sDh, sDx, sDa,
               H, Tq, Ti, Tt, q_off,
               SEG: tl.constexpr, KIND: tl.constexpr,
               HAS_DPAD: tl.constexpr, HAS_EPAD: tl.constexpr,
               BX: tl.constexpr, BY: tl.constexpr, BA: tl.constexpr,
               DOT_PREC: tl.constexpr):
    if SEG == 0:
        n_a = Ti
    else:
        n_a = Tt
    n_ab = tl.cdiv(n_a, BA)
    n_xb = tl.cdiv(Tq, BX)
    pid, bh = _tile_and_bh(n_xb * n_ab)
    # longest programs first under causal masks (large x and large a: longest y loop)
    xb = n_xb - 1 - pid // n_ab
    ab = n_ab - 1 - pid % n_ab
    b = bh // H
    h = bh % H
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)

    offs_x = xb * BX + tl.arange(0, BX)                       # (BX,)
    offs_a = ab * BA + tl.arange(0, BA)                       # (BA,) segment-local
    x_abs = offs_x + q_off
    x_ok = (offs_x < Tq) & _valid(DVALID, b, x_abs, Tt, HAS_DPAD)
    lse = tl.load(LSE + bh * Tq + offs_x, mask=offs_x < Tq, other=0.0)
    delta = tl.load(DELTA + bh * Tq + offs_x, mask=offs_x < Tq, other=0.0)
    P = _prefix_len(PLEN, b, KIND)
    dlo, dhi = _bounds(DLO, DHI, b, Tt, HAS_DPAD)
    x_first = xb * BX + q_off
    x_last = tl.minimum(xb * BX + BX, Tq) - 1 + q_off
    a_first = ab * BA
    a_last = tl.minimum(a_first + BA, n_a) - 1
    live = (x_last >= dlo) & (x_first < dhi)
    DO_rows = DO + b64 * sGb + h64 * sGh + offs_x[:, None] * sGx   # (BX, 1)

    x_in = offs_x < Tq
    # interior y-blocks (no padding, full x/a tiles, premise rel true on the tile) skip masks
    elo, ehi = _bounds(ELO, EHI, b, Ti, HAS_EPAD)
    even = _span_ok(DSPAN, b, HAS_DPAD) & _span_ok(ESPAN, b, HAS_EPAD)
    even = even & (xb * BX + BX <= Tq) & (x_first >= dlo) & (x_first + BX <= dhi) & (a_first + BA <= n_a)
    dp = tl.zeros([BX, BA], tl.float32)
    if SEG == 0:
        even = even & (a_first >= elo) & (a_first + BA <= ehi)
        a_ok = _valid(EVALID, b, offs_a, Ti, HAS_EPAD)
        kok = x_ok[:, None] & a_ok[None, :]
        col = offs_a
        live = live & (a_last >= elo) & (a_first < ehi)
        y_lo = (elo // BY) * BY
        y_hi = tl.where(live, ehi, y_lo)
        VE_rows = VE + b64 * sEb + h64 * sEh + offs_a[:, None] * sEa            # (BA, 1)
        dp = _dk_loops(dp, DO_rows, VE_rows, y_lo, y_hi, ((elo + BY - 1) // BY) * BY, (ehi // BY) * BY, even,
                       0, x_in, a_ok, offs_a, P, b, EVALID, Ti, sGy, sEy, 0, HAS_EPAD, BY, DOT_PREC)
    else:
        a_ok = _valid(DVALID, b, offs_a, Tt, HAS_DPAD)
        kok = x_ok[:, None] & a_ok[None, :] & _rel(x_abs[:, None], offs_a[None, :], P, KIND)
        col = Ti + offs_a
        live = live & (a_last >= dlo) & (a_first < dhi)
        even = even & (a_first >= dlo) & (a_first + BA <= dhi)
        if KIND == 1 or KIND == 3:
            live = live & (a_first <= x_last)
        elif KIND == 2:
            live = live & ((a_first <= x_last) | (a_first < P))
        V_rows = V + b64 * sVb + h64 * sVh + offs_a[:, None] * sVa               # (BA, 1)
        if KIND == 3:
            # premise columns y in I (encoder-valid, always related) ...
            y_lo = (elo // BY) * BY
            y_hi = tl.where(live, ehi, y_lo)
            dp = _dk_loops(dp, DO_rows, V_rows, y_lo, y_hi, ((elo + BY - 1) // BY) * BY, (ehi // BY) * BY, even,
                           0, x_in, a_ok, offs_a, P, b, EVALID, Ti, sGy, sVy, 0, HAS_EPAD, BY, DOT_PREC)
            # ... then decoder columns Ti + y' with y' <= a (causal)
            y_lo = (dlo // BY) * BY
            y_hi = tl.where(live, tl.minimum(tl.minimum(a_last + 1, Tt), dhi), y_lo)
            f_hi = tl.minimum(((a_first + 1) // BY) * BY, (dhi // BY) * BY)
            dp = _dk_loops(dp, DO_rows, V_rows, y_lo, y_hi, ((dlo + BY - 1) // BY) * BY, f_hi, even, Ti,
                           x_in, a_ok, offs_a, P, b, DVALID, Tt, sGy, sVy, 1, HAS_DPAD, BY, DOT_PREC)
        else:
            # premise v(a, y) needs rel(a, y): causal y <= a; prefix y <= a or y < P
            y_lo = (dlo // BY) * BY
            y_hi = tl.where(live, tl.minimum(_kernel_hi(a_last, P, Tt, KIND), dhi), y_lo)
            if KIND == 1:
                f_hi = ((a_first + 1) // BY) * BY
            elif KIND == 2:
                f_hi = (tl.maximum(a_first + 1, P) // BY) * BY
            else:
                f_hi = Tt
            f_hi = tl.minimum(f_hi, (dhi // BY) * BY)
            dp = _dk_loops(dp, DO_rows, V_rows, y_lo, y_hi, ((dlo + BY - 1) // BY) * BY, f_hi, even, 0,
                           x_in, a_ok, offs_a, P, b, DVALID, Tt, sGy, sVy, KIND, HAS_DPAD, BY, DOT_PREC)

    # kok is all False on a tile that is not live, so no K traffic there
    K_rows = K + b64 * sKb + h64 * sKh + offs_x[:, None] * sKx
    k = tl.load(K_rows + col[None, :] * sKa, mask=kok, other=float("-inf")).to(tl.float32)
    p = tl.exp2(k * LOG2E - lse[:, None])
    dk = p * (dp - delta[:, None])
    DK_ptrs = DK + b64 * sDb + h64 * sDh + offs_x[:, None] * sDx + col[None, :] * sDa
    tl.store(DK_ptrs, dk.to(DK.dtype.element_ty), mask=(offs_x < Tq)[:, None] & (offs_a < n_a)[None, :])


@triton.jit
def _dv_step(acc, K_base, col, DO_cols, LSE_row, x0, q_off, Tq, Tt, a_ok, offs_a, y_ok, P, b, DVALID, sKx, sKa,
             sGx, REL: tl.constexpr, HAS_DPAD: tl.constexpr, BX: tl.constexpr, DOT_PREC: tl.constexpr,
             MASKED: tl.constexpr, KT: tl.constexpr):
    """acc(BA, BY) += p(x, a)^T @ dO(x, y) for rows x0 .. x0+BX, p recomputed from lse.

    KT=False loads the K tile (BX, BA) and transposes p in registers; KT=True loads
    K^T (BA, BX) directly and builds p^T, with no register transpose."""
    offs_x = x0 + tl.arange(0, BX)
    G_ptrs = DO_cols + offs_x[:, None] * sGx                                      # (BX, BY)
    if KT:
        K_ptrs = K_base + col[:, None] * sKa + offs_x[None, :] * sKx              # (BA, BX)
    else:
        K_ptrs = K_base + offs_x[:, None] * sKx + col[None, :] * sKa              # (BX, BA)
    if MASKED:
        x_abs = offs_x + q_off
        x_ok = (offs_x < Tq) & _valid(DVALID, b, x_abs, Tt, HAS_DPAD)
        if KT:
            kok = a_ok[:, None] & x_ok[None, :] & _rel(x_abs[None, :], offs_a[:, None], P, REL)
        else:
            kok = x_ok[:, None] & a_ok[None, :] & _rel(x_abs[:, None], offs_a[None, :], P, REL)
        k = tl.load(K_ptrs, mask=kok, other=float("-inf")).to(tl.float32)
        lse = tl.load(LSE_row + offs_x, mask=offs_x < Tq, other=0.0)
        g = tl.load(G_ptrs, mask=x_ok[:, None] & y_ok[None, :], other=0.0)
    else:
        k = tl.load(K_ptrs).to(tl.float32)
        lse = tl.load(LSE_row + offs_x)
        g = tl.load(G_ptrs)
    if KT:
        pt = tl.exp2(k * LOG2E - lse[None, :])                                    # (BA, BX)
        res = tl.dot(pt.to(g.dtype), g, acc, input_precision=DOT_PREC)
    else:
        p = tl.exp2(k * LOG2E - lse[:, None])                                     # (BX, BA)
        res = tl.dot(tl.trans(p.to(g.dtype)), g, acc, input_precision=DOT_PREC)
    return res


# --------------------------------------------------------------------------
# dV(a, y) = Vmask(a, y) * sum_x p(x, a) dO(x, y)
# grid (cdiv(n_a, BA) * cdiv(n_y, BY) * B*H,) for one premise:
#   SEG 0: v_enc (a, y in I), K column a;  SEG 1: v (j in T, y in [0, Y)), K column Ti + j
# --------------------------------------------------------------------------
@triton.jit
def _dv_kernel(K, DO, LSE, DV, DVALID, EVALID, DLO, DHI, ELO, EHI, PLEN, DSPAN, ESPAN,
               sKb, sKh, sKx, sKa,
               sGb, sGh, sGx, sGy,
               sWb, sWh, sWa, sWy,
               H, Tq, Ti, Tt, q_off,
               SEG: tl.constexpr, KIND: tl.constexpr,
               HAS_DPAD: tl.constexpr, HAS_EPAD: tl.constexpr,
               BX: tl.constexpr, BY: tl.constexpr, BA: tl.constexpr,
               DOT_PREC: tl.constexpr, KT: tl.constexpr):
    if SEG == 0:
        n_a = Ti
        n_y = Ti
    else:
        n_a = Tt
        n_y = Ti + Tt
    n_yb = tl.cdiv(n_y, BY)
    pid, bh = _tile_and_bh(tl.cdiv(n_a, BA) * n_yb)
    ab = pid // n_yb
    yb = pid % n_yb
    b = bh // H
    h = bh % H
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)

    offs_a = ab * BA + tl.arange(0, BA)                       # (BA,) segment-local
    offs_y = yb * BY + tl.arange(0, BY)                       # (BY,) premise column
    P = _prefix_len(PLEN, b, KIND)
    dlo, dhi = _bounds(DLO, DHI, b, Tt, HAS_DPAD)
    a_first = ab * BA
    a_last = tl.minimum(a_first + BA, n_a) - 1
    y_first = yb * BY
    y_last = tl.minimum(y_first + BY, n_y) - 1

    elo, ehi = _bounds(ELO, EHI, b, Ti, HAS_EPAD)
    if SEG == 0:
        a_ok = _valid(EVALID, b, offs_a, Ti, HAS_EPAD)
        y_ok = _valid(EVALID, b, offs_y, Ti, HAS_EPAD)
        vok = a_ok[:, None] & y_ok[None, :]
        col = offs_a
        live = (a_last >= elo) & (a_first < ehi) & (y_last >= elo) & (y_first < ehi)
        x_abs_lo = dlo
    else:
        a_ok = _valid(DVALID, b, offs_a, Tt, HAS_DPAD)
        col = Ti + offs_a
        live = (a_last >= dlo) & (a_first < dhi)
        if KIND == 3:
            y_enc = offs_y < Ti
            y_ok = tl.where(y_enc, _valid(EVALID, b, offs_y, Ti, HAS_EPAD),
                            _valid(DVALID, b, offs_y - Ti, Tt, HAS_DPAD))
            vok = a_ok[:, None] & y_ok[None, :] & (y_enc[None, :] | ((offs_y - Ti)[None, :] <= offs_a[:, None]))
            live = live & ((y_first < Ti) | (y_first - Ti <= a_last))
        else:
            y_ok = _valid(DVALID, b, offs_y, Tt, HAS_DPAD)
            vok = a_ok[:, None] & y_ok[None, :] & _rel(offs_a[:, None], offs_y[None, :], P, KIND)
            live = live & (y_last >= dlo) & (y_first < dhi)
            if KIND == 1:
                live = live & (y_first <= a_last)
            elif KIND == 2:
                live = live & ((y_first <= a_last) | (y_first < P))
        # rows x that may use column a: rel(x_abs, a)
        if KIND == 1 or KIND == 3:
            x_abs_lo = tl.maximum(a_first, dlo)
        elif KIND == 2:
            x_abs_lo = tl.maximum(tl.where(a_first < P, 0, a_first), dlo)
        else:
            x_abs_lo = dlo
    x_lo = tl.maximum(x_abs_lo - q_off, 0)
    x_lo = (x_lo // BX) * BX
    x_hi = tl.minimum(dhi - q_off, Tq)
    x_hi = tl.where(live, x_hi, x_lo)

    # interior x-blocks (no padding, full a/y tiles, kernel rel true on the tile) skip masks
    if SEG == 0:
        f_lo = 0
    else:
        if KIND == 1 or KIND == 3:
            f_lo = ((tl.maximum(a_last - q_off, 0) + BX - 1) // BX) * BX
        elif KIND == 2:
            f_lo = tl.where(a_last < P, 0, ((tl.maximum(a_last - q_off, 0) + BX - 1) // BX) * BX)
        else:
            f_lo = 0
    even = _span_ok(DSPAN, b, HAS_DPAD) & _span_ok(ESPAN, b, HAS_EPAD)
    even = even & (a_first + BA <= n_a) & (y_first + BY <= n_y)
    if SEG == 0:
        even = even & (a_first >= elo) & (a_first + BA <= ehi) & (y_first >= elo) & (y_first + BY <= ehi)
    elif KIND == 3:
        even = even & (a_first >= dlo) & (a_first + BA <= dhi) \
            & _enc_dec_cols_ok(y_first, y_last, Ti, elo, ehi, dlo, dhi)
    else:
        even = even & (a_first >= dlo) & (a_first + BA <= dhi) & (y_first >= dlo) & (y_first + BY <= dhi)
    # rows inside the valid span [dlo, dhi) (absolute) -> relative to q_off
    f_lo = tl.maximum(f_lo, ((tl.maximum(dlo - q_off, 0) + BX - 1) // BX) * BX)
    f_hi = tl.minimum((Tq // BX) * BX, (tl.maximum(dhi - q_off, 0) // BX) * BX)
    f_lo = tl.minimum(tl.maximum(f_lo, x_lo), x_hi)
    f_hi = tl.maximum(tl.minimum(f_hi, x_hi), f_lo)
    f_lo = tl.where(even, f_lo, x_hi)
    f_hi = tl.where(even, f_hi, x_hi)

    K_base = K + b64 * sKb + h64 * sKh
    DO_cols = DO + b64 * sGb + h64 * sGh + offs_y[None, :] * sGy                 # (1, BY)
    LSE_row = LSE + bh * Tq
    acc = tl.zeros([BA, BY], tl.float32)
    for x0 in range(x_lo, f_lo, BX):
        acc = _dv_step(acc, K_base, col, DO_cols, LSE_row, x0, q_off, Tq, Tt, a_ok, offs_a, y_ok, P, b, DVALID,
                       sKx, sKa, sGx, KIND * SEG, HAS_DPAD, BX, DOT_PREC, True, KT)
    for x0 in range(f_lo, f_hi, BX):
        acc = _dv_step(acc, K_base, col, DO_cols, LSE_row, x0, q_off, Tq, Tt, a_ok, offs_a, y_ok, P, b, DVALID,
                       sKx, sKa, sGx, KIND * SEG, HAS_DPAD, BX, DOT_PREC, False, KT)
    for x0 in range(f_hi, x_hi, BX):
        acc = _dv_step(acc, K_base, col, DO_cols, LSE_row, x0, q_off, Tq, Tt, a_ok, offs_a, y_ok, P, b, DVALID,
                       sKx, sKa, sGx, KIND * SEG, HAS_DPAD, BX, DOT_PREC, True, KT)

    dv = tl.where(vok, acc, 0.0)
    DV_ptrs = DV + b64 * sWb + h64 * sWh + offs_a[:, None] * sWa + offs_y[None, :] * sWy
    tl.store(DV_ptrs, dv.to(DV.dtype.element_ty), mask=(offs_a < n_a)[:, None] & (offs_y < n_y)[None, :])
