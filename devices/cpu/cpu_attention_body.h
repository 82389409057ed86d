/*
 * cpu_attention_body.h — the blocked attention kernels for one float type, included by
 * cpu_attention.c once per dtype with REAL (float or double), SUF (f32 or f64), GEMM
 * (td_blas_sgemm or td_blas_dgemm) and EXP_S (expf or exp) defined. No include guard.
 *
 * Forward (flash-attention): a block of BQ query rows walks the key blocks, each giving a
 * BQ x BK score block by one GEMM; an online softmax keeps each row's running max m and sum l
 * and rescales the output accumulator when the max grows; then acc += P V by a GEMM. Causal:
 * key blocks past the query block's last row are never visited. Only the output and the row's
 * logsumexp m + log(l) are written.
 *
 * Backward (flash-attention 2): per key block, the query rows that see it (from the block's
 * first key on, when causal), BQ_BWD at a time, recompute the scores, P = exp(s - lse), then dV += P^T dO, dP = dO V^T, dS = P * (dP - D) with
 * D = rowsum(dO * O), dQ += scale dS K, dK += scale dS^T Q: five GEMMs, nothing of size L x S.
 *
 * The products with K and V as right-hand operands read a transposed copy of the key block
 * (BK or BK_FWD keys, made once per block): OpenBLAS 0.3.21 runs A B^T ~1.5x slower than A B
 * at 64-128 rows.
 */
#define CAT2_(a, b) a##_##b
#define CAT_(a, b) CAT2_(a, b)
#define FN(name) CAT_(name, SUF)

/* Adds the mask to a score block (rows i0.., keys j0..) and sets keys after the query to -inf
 * when causal. */
static void FN(mask_block)(const attn_geom *g, const REAL *mask, int64_t i0, int64_t j0,
                           int64_t nq, int64_t nk, REAL *sc, int64_t ld)
{
    if (mask)
        for (int64_t r = 0; r < nq; r++) {
            const REAL *mr = mask + (i0 + r) * g->m_rs + j0 * g->m_cs;
            for (int64_t j = 0; j < nk; j++)
                sc[r * ld + j] += mr[j * g->m_cs];
        }
    if (g->causal && j0 + nk - 1 > i0)
        for (int64_t r = 0; r < nq; r++)
            for (int64_t j = attn_max(i0 + r + 1 - j0, 0); j < nk; j++)
                sc[r * ld + j] = (REAL)-INFINITY;
}

/* Row helpers with eight independent lanes, so that the compiler's SLP pass makes vectors of
 * them at -O2 (and the sums' order is fixed: lane by lane, then the lanes in order). */
static REAL FN(row_max)(const REAL *s, int64_t n, REAL init)
{
    REAL m[8] = {init, init, init, init, init, init, init, init};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int u = 0; u < 8; u++)
            m[u] = s[j + u] > m[u] ? s[j + u] : m[u];
    for (; j < n; j++)
        m[0] = s[j] > m[0] ? s[j] : m[0];
    for (int u = 1; u < 8; u++)
        m[0] = m[u] > m[0] ? m[u] : m[0];
    return m[0];
}

static void FN(row_sub)(REAL *s, int64_t n, REAL c)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int u = 0; u < 8; u++)
            s[j + u] -= c;
    for (; j < n; j++)
        s[j] -= c;
}

static void FN(row_scale)(REAL *s, int64_t n, REAL c)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int u = 0; u < 8; u++)
            s[j + u] *= c;
    for (; j < n; j++)
        s[j] *= c;
}

/* o = a / d (a division each, as the composite's; o and a do not overlap) */
static void FN(row_div)(REAL *restrict o, const REAL *restrict a, int64_t n, REAL d)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int u = 0; u < 8; u++)
            o[j + u] = a[j + u] / d;
    for (; j < n; j++)
        o[j] = a[j] / d;
}

static REAL FN(row_sum)(const REAL *s, int64_t n)
{
    REAL a[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int u = 0; u < 8; u++)
            a[u] += s[j + u];
    for (; j < n; j++)
        a[0] += s[j];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* dst[c * ld + r] = src[r * rs + c] for rows x cols of src: a key block as the right-hand
 * operand of a plain product (OpenBLAS's A B^T is ~1.5x slower than its A B at these sizes),
 * in 4 x 4 tiles, so that each tile's loads and stores stay in a few cache lines. */
static void FN(transpose)(const REAL *src, int64_t rs, int64_t rows, int64_t cols, REAL *dst,
                          int64_t ld)
{
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        for (int64_t c = 0; c < cols; c++) {
            REAL *d = dst + c * ld + r;
            d[0] = src[r * rs + c];
            d[1] = src[(r + 1) * rs + c];
            d[2] = src[(r + 2) * rs + c];
            d[3] = src[(r + 3) * rs + c];
        }
    }
    for (; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[c * ld + r] = src[r * rs + c];
}

/* One key block of the online softmax: sc (scores) becomes P relative to the new row maxima,
 * m and l are updated and the accumulator rows rescaled. */
static void FN(online_softmax)(const attn_geom *g, int64_t nq, int64_t nk, REAL *sc, REAL *m,
                               REAL *l, REAL *acc)
{
    for (int64_t r = 0; r < nq; r++) {
        REAL *s = sc + r * ATTN_BK_FWD, mx = FN(row_max)(s, nk, m[r]);
        if (mx == (REAL)-INFINITY) { /* every key so far masked: nothing to add */
            memset(s, 0, sizeof(REAL) * (size_t)nk);
            continue;
        }
        FN(row_sub)(s, nk, mx);
        g->exp_fn(nk, s, s);
        REAL corr = EXP_S(m[r] - mx); /* 0 when m was -inf */
        l[r] = l[r] * corr + FN(row_sum)(s, nk);
        m[r] = mx;
        if (corr != 1)
            FN(row_scale)(acc + r * g->Ev, g->Ev, corr);
    }
}

/* Query rows [i0, i0 + nq) of batch b; scratch: sc (BQ x BK), acc (BQ x Ev), m, l (BQ). */
static void FN(fwd_block)(const attn_geom *g, int64_t b, int64_t i0, REAL *sc, REAL *acc,
                          REAL *m, REAL *l, REAL *kt)
{
    const REAL *q = (const REAL *)td_tensor_data(g->q) + attn_batch_offset(g, g->q, b);
    const REAL *k = (const REAL *)td_tensor_data(g->k) + attn_batch_offset(g, g->k, b);
    const REAL *v = (const REAL *)td_tensor_data(g->v) + attn_batch_offset(g, g->v, b);
    const REAL *mask =
        g->mask ? (const REAL *)td_tensor_data(g->mask) + attn_batch_offset(g, g->mask, b) : NULL;
    int64_t nq = attn_min(attn_fwd_rows(g), g->L - i0);
    int64_t kend = g->causal ? attn_min(g->S, i0 + nq) : g->S;
    for (int64_t r = 0; r < nq; r++) {
        m[r] = (REAL)-INFINITY;
        l[r] = 0;
    }
    memset(acc, 0, sizeof(REAL) * (size_t)(nq * g->Ev));
    for (int64_t j0 = 0; j0 < kend; j0 += ATTN_BK_FWD) {
        int64_t nk = attn_min(ATTN_BK_FWD, kend - j0);
        FN(transpose)(k + j0 * g->k_rs, g->k_rs, nk, g->E, kt, ATTN_BK_FWD);
        GEMM(false, false, nq, nk, g->E, (REAL)g->scale, q + i0 * g->q_rs, g->q_rs, kt,
             ATTN_BK_FWD, 0, sc, ATTN_BK_FWD);
        FN(mask_block)(g, mask, i0, j0, nq, nk, sc, ATTN_BK_FWD);
        FN(online_softmax)(g, nq, nk, sc, m, l, acc);
        GEMM(false, false, nq, g->Ev, nk, 1, sc, ATTN_BK_FWD, v + j0 * g->v_rs, g->v_rs, 1, acc,
             g->Ev);
    }
    REAL *out = (REAL *)g->out + attn_row_pos(g, b, i0, g->L, g->Ev);
    REAL *lse = (REAL *)g->out + g->n * g->L * g->Ev + b * g->L + i0;
    int64_t out_rs = attn_row_stride(g, g->Ev);
    for (int64_t r = 0; r < nq; r++) {
        FN(row_div)(out + r * out_rs, acc + r * g->Ev, g->Ev, l[r]); /* l = 0 (all masked): NaN */
        lse[r] = m[r] + (REAL)log((double)l[r]);
    }
}

/* Tasks [begin, end): task t is query block t % blocks of batch t / blocks. */
static void FN(fwd_range)(void *ctx, int64_t begin, int64_t end)
{
    attn_geom *g = ctx;
    int64_t bq = attn_fwd_rows(g), blocks = (g->L + bq - 1) / bq;
    size_t n = (size_t)(ATTN_BQ * ATTN_BK_FWD + ATTN_BQ * g->Ev + 2 * ATTN_BQ +
                        g->E * ATTN_BK_FWD);
    REAL *scratch = td_malloc(sizeof(REAL) * n);
    if (!scratch) {
        __atomic_store_n(&g->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    REAL *sc = scratch, *acc = sc + ATTN_BQ * ATTN_BK_FWD, *m = acc + ATTN_BQ * g->Ev, *l = m + ATTN_BQ;
    for (int64_t t = begin; t < end; t++)
        FN(fwd_block)(g, t / blocks, (t % blocks) * bq, sc, acc, m, l, l + ATTN_BQ);
    free(scratch);
}

/* The backward's per-batch operands. */
typedef struct FN(bwd_ops) {
    const REAL *q, *k, *v, *mask, *o, *lse, *dout;
    REAL *dq, *dk, *dv, *D;
    REAL *kt, *vt; /* the key block's K and V transposed: E x BK and Ev x BK */
    int64_t o_rs, dout_rs, dq_rs, dk_rs, dv_rs; /* row strides (attn_row_stride, dout's) */
} FN(bwd_ops);

/* The dot product of two rows, in the lanes of row_sum. */
static REAL FN(row_dot)(const REAL *a, const REAL *b, int64_t n)
{
    REAL s[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int u = 0; u < 8; u++)
            s[u] += a[j + u] * b[j + u];
    for (; j < n; j++)
        s[0] += a[j] * b[j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* dS = P * (dP - D) for one row, in place of dP. */
static void FN(row_grad)(REAL *ds, const REAL *pr, int64_t n, REAL d)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int u = 0; u < 8; u++)
            ds[j + u] = pr[j + u] * (ds[j + u] - d);
    for (; j < n; j++)
        ds[j] = pr[j] * (ds[j] - d);
}

/* Query rows [i0, i0 + nq) against one key block; sc and dp are BQ_BWD x BK scratch. The
 * first pair of a key block writes its dK and dV rows, the first of a query block (key block 0,
 * which every query sees) its dQ rows; later ones add (beta 1). */
static void FN(bwd_pair)(const attn_geom *g, const FN(bwd_ops) *p, int64_t i0, int64_t nq,
                         int64_t j0, REAL *sc, REAL *dp)
{
    REAL kv_beta = i0 == (g->causal ? j0 : 0) ? 0 : 1, q_beta = j0 == 0 ? 0 : 1;
    int64_t nk = attn_min(ATTN_BK, g->S - j0);
    REAL scale = (REAL)g->scale;
    GEMM(false, false, nq, nk, g->E, scale, p->q + i0 * g->q_rs, g->q_rs, p->kt, ATTN_BK, 0, sc,
         ATTN_BK);
    FN(mask_block)(g, p->mask, i0, j0, nq, nk, sc, ATTN_BK);
    for (int64_t r = 0; r < nq; r++) {
        REAL *s = sc + r * ATTN_BK;
        FN(row_sub)(s, nk, p->lse[i0 + r]);
        g->exp_fn(nk, s, s); /* P */
    }
    const REAL *dout = p->dout + i0 * p->dout_rs;
    GEMM(true, false, nk, g->Ev, nq, 1, sc, ATTN_BK, dout, p->dout_rs, kv_beta,
         p->dv + j0 * p->dv_rs, p->dv_rs);
    GEMM(false, false, nq, nk, g->Ev, 1, dout, p->dout_rs, p->vt, ATTN_BK, 0, dp, ATTN_BK);
    for (int64_t r = 0; r < nq; r++)
        FN(row_grad)(dp + r * ATTN_BK, sc + r * ATTN_BK, nk, p->D[i0 + r]);
    GEMM(false, false, nq, g->E, nk, scale, dp, ATTN_BK, p->k + j0 * g->k_rs, g->k_rs, q_beta,
         p->dq + i0 * p->dq_rs, p->dq_rs);
    GEMM(true, false, nk, g->E, nq, scale, dp, ATTN_BK, p->q + i0 * g->q_rs, g->q_rs, kv_beta,
         p->dk + j0 * p->dk_rs, p->dk_rs);
}

/* Rows [r0, r1) of a [rows, width] gradient (rows rs apart) set to zero. */
static void FN(zero_rows)(REAL *m, int64_t rs, int64_t r0, int64_t r1, int64_t width)
{
    for (int64_t r = r0; r < r1; r++)
        memset(m + r * rs, 0, sizeof(REAL) * (size_t)width);
}

static void FN(bwd_batch)(const attn_geom *g, int64_t b, REAL *sc, REAL *dp, REAL *D, REAL *kt)
{
    int64_t N = g->n, L = g->L, S = g->S, E = g->E, Ev = g->Ev;
    REAL *out = g->out;
    const REAL *packed = g->packed;
    FN(bwd_ops) p = {
        (const REAL *)td_tensor_data(g->q) + attn_batch_offset(g, g->q, b),
        (const REAL *)td_tensor_data(g->k) + attn_batch_offset(g, g->k, b),
        (const REAL *)td_tensor_data(g->v) + attn_batch_offset(g, g->v, b),
        g->mask ? (const REAL *)td_tensor_data(g->mask) + attn_batch_offset(g, g->mask, b) : NULL,
        packed + attn_row_pos(g, b, 0, L, Ev), packed + N * L * Ev + b * L,
        (const REAL *)td_tensor_data(g->dout) + attn_batch_offset(g, g->dout, b),
        out + attn_row_pos(g, b, 0, L, E), out + N * L * E + attn_row_pos(g, b, 0, S, E),
        out + N * L * E + N * S * E + attn_row_pos(g, b, 0, S, Ev), D, kt, kt + E * ATTN_BK,
        attn_row_stride(g, Ev), g->dout->strides[g->nb], attn_row_stride(g, E),
        attn_row_stride(g, E), attn_row_stride(g, Ev)};
    for (int64_t i = 0; i < L; i++)
        D[i] = FN(row_dot)(p.dout + i * p.dout_rs, p.o + i * p.o_rs, Ev);
    if (S == 0) /* dQ rows are written by key block 0 */
        FN(zero_rows)(p.dq, p.dq_rs, 0, L, E);
    /* key blocks no query row pairs with (causal, from row L; every block when L = 0) */
    int64_t paired = L == 0      ? 0
                     : g->causal ? attn_min(S, (L + ATTN_BK - 1) / ATTN_BK * ATTN_BK)
                                 : S;
    FN(zero_rows)(p.dk, p.dk_rs, paired, S, E);
    FN(zero_rows)(p.dv, p.dv_rs, paired, S, Ev);
    for (int64_t j0 = 0; j0 < S; j0 += ATTN_BK) { /* causal: queries before j0 see none of it */
        int64_t i0 = g->causal ? j0 : 0, nk = attn_min(ATTN_BK, S - j0);
        if (i0 >= L)
            continue;
        FN(transpose)(p.k + j0 * g->k_rs, g->k_rs, nk, E, p.kt, ATTN_BK);
        FN(transpose)(p.v + j0 * g->v_rs, g->v_rs, nk, Ev, p.vt, ATTN_BK);
        for (; i0 < L; i0 += ATTN_BQ_BWD)
            FN(bwd_pair)(g, &p, i0, attn_min(ATTN_BQ_BWD, L - i0), j0, sc, dp);
    }
}

static void FN(bwd_range)(void *ctx, int64_t begin, int64_t end)
{
    attn_geom *g = ctx;
    size_t n = (size_t)(2 * ATTN_BQ_BWD * ATTN_BK + g->L + (g->E + g->Ev) * ATTN_BK);
    REAL *scratch = td_malloc(sizeof(REAL) * n);
    if (!scratch) {
        __atomic_store_n(&g->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    REAL *sc = scratch, *dp = sc + ATTN_BQ_BWD * ATTN_BK, *D = dp + ATTN_BQ_BWD * ATTN_BK;
    for (int64_t b = begin; b < end; b++)
        FN(bwd_batch)(g, b, sc, dp, D, D + g->L);
    free(scratch);
}

#undef FN
#undef CAT_
#undef CAT2_
