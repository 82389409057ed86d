/*
 * cpu_elementwise.c — unary, binary and where on the CPU: the iteration around the kernels.
 *
 * The arithmetic lives in cpu_elementwise_isa.c as contiguous 1-D loops, one table per vector
 * ISA; this file picks the table, and turns any strides into calls of those loops:
 *  1. Operands are read as if broadcast to out's shape; size-1 dims are dropped and adjacent
 *     dims that are contiguous with respect to each other in every operand are merged. So a
 *     contiguous tensor becomes one long row, and x + scalar one row with a stride-0 operand.
 *  2. The flat output range is cut into rows of the innermost merged dim. A row whose inputs are
 *     all contiguous goes straight to the kernel; other inputs are gathered (or, for stride 0,
 *     replicated once) into L1-sized stack buffers and the kernel runs on those.
 *  3. When an input is read across its layout (x + y^T), out is walked in tiles instead, so
 *     that input is read along its own short stride.
 *  4. Work above a size threshold is split over threads by output range (or by tile rows); a
 *     small op does no allocation, takes no lock and touches no thread pool.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_elementwise.h"
#include "cpu_isa.h"
#include "cpu_kernels.h"

#define MAX_OPERANDS 4 /* out and up to three inputs (where) */
#define MAX_INPUTS (MAX_OPERANDS - 1)
/* Elements per gather buffer: 4 KiB of doubles, so three buffers sit well inside L1 and each
 * kernel call does enough work to hide its call overhead. */
#define GATHER_LEN 512
/* Threads get ranges that start on a multiple of this many elements, so no two threads write
 * the same cache line of out and each starts vector-aligned when out is. */
#define PAR_ALIGN 64
/* Below these element counts an op runs on the calling thread: a td_parallel_for handoff costs
 * ~0.7 us on the 2-core machine we measured, which a 64K-element add (~4.5 us alone) repays and
 * a 32K one does not. Transcendental ops cost ~5x more per element, so they split sooner. */
#define PAR_MIN_CHEAP 65536
#define PAR_MIN_COSTLY 16384

typedef union ew_kernel {
    td_ew_unary_fn unary;
    td_ew_binary_fn binary;
    td_ew_where_fn where;
} ew_kernel;

/* One elementwise launch, with dims merged. Dim 0 is the innermost; strides are in bytes.
 * Operand 0 is out, whose innermost stride is always its element size. */
typedef struct ew_plan {
    ew_kernel kernel;
    int nin;
    int ndim;
    int64_t numel;
    int64_t shape[TIDE_MAX_DIMS];
    int64_t stride[MAX_OPERANDS][TIDE_MAX_DIMS];
    char *data[MAX_OPERANDS];
    int64_t esize[MAX_OPERANDS];
} ew_plan;

static const td_ew_kernels *kernel_table(void)
{
    switch (td_cpu_isa()) { /* detected once, then a cached load */
    case TD_ISA_AVX512: return &td_ew_kernels_avx512;
    case TD_ISA_AVX2: return &td_ew_kernels_avx2;
    default: return &td_ew_kernels_baseline;
    }
}

static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- planning -------------------------------------------------------------------------------- */

static int64_t numel_of(const tide_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* True when outer dim d can be folded into the merged dim m below it in every operand. */
static bool mergeable(const ew_plan *p, int64_t (*st)[TIDE_MAX_DIMS], int d, int m)
{
    for (int k = 0; k <= p->nin; k++)
        if (st[k][d] != p->stride[k][m] * p->shape[m])
            return false;
    return true;
}

/* The element stride of t read as one flat row of out's elements: 1 when t has out's shape and
 * is contiguous, 0 when t is a single element, -1 otherwise. Cheap, for the common cases. */
static int64_t flat_stride(const tide_tensor *t, const tide_tensor *out)
{
    if (numel_of(t) == 1)
        return 0;
    if (t->ndim != out->ndim)
        return -1;
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != out->shape[d] || (t->shape[d] != 1 && t->strides[d] != expect))
            return -1;
        expect *= t->shape[d];
    }
    return 1;
}

/* Fills the strides of a plan when every operand is a flat row (see flat_stride); false when
 * one is not. */
static bool plan_flat(ew_plan *p, const tide_tensor *out, const tide_tensor *const *ins)
{
    for (int k = 0; k < p->nin; k++) {
        int64_t s = flat_stride(ins[k], out);
        if (s < 0)
            return false;
        p->stride[k + 1][0] = p->numel == 1 ? 1 : s; /* one element: nothing to replicate */
    }
    p->ndim = 1;
    p->shape[0] = p->numel;
    p->stride[0][0] = 1;
    return true;
}

/* Fills the strides of a plan in general: broadcast, drop size-1 dims, merge dims. */
static void plan_strided(ew_plan *p, const tide_tensor *out, const tide_tensor *const *ins)
{
    int nd = out->ndim, nin = p->nin;
    int64_t st[MAX_OPERANDS][TIDE_MAX_DIMS]; /* in elements, dim 0 outermost as in the tensor */
    for (int k = 0; k < nin; k++)
        td_broadcast_strides(ins[k], nd, out->shape, st[k + 1]);
    td_contiguous_strides(nd, out->shape, st[0]);

    p->ndim = 0;
    for (int d = nd - 1; d >= 0; d--) {
        if (out->shape[d] == 1)
            continue;
        int m = p->ndim - 1;
        if (m >= 0 && mergeable(p, st, d, m)) {
            p->shape[m] *= out->shape[d];
            continue;
        }
        m = p->ndim++;
        p->shape[m] = out->shape[d];
        for (int k = 0; k <= nin; k++)
            p->stride[k][m] = st[k][d];
    }
    if (p->ndim == 0) { /* a single element */
        p->ndim = 1;
        p->shape[0] = 1;
        for (int k = 0; k <= nin; k++)
            p->stride[k][0] = 1;
    }
}

/* Fills p for out = f(ins...). Returns false when out is empty (nothing to do). */
static bool plan_init(ew_plan *p, tide_tensor *out, const tide_tensor *const *ins, int nin)
{
    p->nin = nin;
    p->numel = numel_of(out);
    if (p->numel == 0)
        return false;
    if (!plan_flat(p, out, ins))
        plan_strided(p, out, ins);
    for (int k = 0; k <= nin; k++) {
        const tide_tensor *t = k ? ins[k - 1] : out;
        p->data[k] = td_tensor_data(t);
        p->esize[k] = (int64_t)td_dtype_sizes[t->dtype];
        for (int m = 0; m < p->ndim; m++)
            p->stride[k][m] *= p->esize[k];
    }
    return true;
}

/* ---- running rows ---------------------------------------------------------------------------- */

static void call_kernel(const ew_plan *p, int64_t n, void *out, const void *const *in)
{
    switch (p->nin) {
    case 1: p->kernel.unary(n, out, in[0]); break;
    case 2: p->kernel.binary(n, out, in[0], in[1]); break;
    default: p->kernel.where(n, out, in[0], in[1], in[2]); break;
    }
}

/* dst[i] = the element at src + i*stride (bytes), for elements of esize bytes. */
static void gather(void *dst, const char *src, int64_t stride, int64_t n, int64_t esize)
{
    if (stride == esize) {
        memcpy(dst, src, (size_t)(n * esize));
        return;
    }
    switch (esize) {
    case 1:
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = *(const uint8_t *)(src + i * stride);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++)
            memcpy((uint32_t *)dst + i, src + i * stride, 4);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy((uint64_t *)dst + i, src + i * stride, 8);
        break;
    }
}

/* dst[0..n) = *src. */
static void replicate(void *dst, const void *src, int64_t n, int64_t esize)
{
    if (esize == 1) {
        memset(dst, *(const uint8_t *)src, (size_t)n);
    } else if (esize == 4) {
        uint32_t v;
        memcpy(&v, src, 4);
        for (int64_t i = 0; i < n; i++)
            ((uint32_t *)dst)[i] = v;
    } else {
        uint64_t v;
        memcpy(&v, src, 8);
        for (int64_t i = 0; i < n; i++)
            ((uint64_t *)dst)[i] = v;
    }
}

/* A row with at least one non-contiguous input, in pieces of GATHER_LEN elements. A stride-0
 * input is replicated into its buffer once for the whole row. Kept out of line so the
 * contiguous path does not pay for the buffers' stack space. */
static __attribute__((noinline)) void run_row_gathered(const ew_plan *p, const int64_t *off,
                                                       int64_t n)
{
    _Alignas(64) unsigned char buf[MAX_INPUTS][GATHER_LEN * 8];
    const void *in[MAX_INPUTS];
    for (int64_t i = 0; i < n; i += GATHER_LEN) {
        int64_t m = min_i64(GATHER_LEN, n - i);
        for (int k = 1; k <= p->nin; k++) {
            int64_t s = p->stride[k][0];
            const char *src = p->data[k] + off[k] + i * s;
            if (s == p->esize[k]) {
                in[k - 1] = src;
                continue;
            }
            if (s == 0) {
                if (i == 0)
                    replicate(buf[k - 1], src, m, p->esize[k]);
            } else {
                gather(buf[k - 1], src, s, m, p->esize[k]);
            }
            in[k - 1] = buf[k - 1];
        }
        call_kernel(p, m, p->data[0] + off[0] + i * p->esize[0], in);
    }
}

/* n elements of the innermost dim, starting at byte offsets off[] of each operand. */
static void run_row(const ew_plan *p, const int64_t *off, int64_t n)
{
    const void *in[MAX_INPUTS];
    for (int k = 1; k <= p->nin; k++) {
        if (p->stride[k][0] != p->esize[k]) {
            run_row_gathered(p, off, n);
            return;
        }
        in[k - 1] = p->data[k] + off[k];
    }
    call_kernel(p, n, p->data[0] + off[0], in);
}

/* Output elements [begin, end) in row-major order. */
static void run_range(const ew_plan *p, int64_t begin, int64_t end)
{
    int64_t idx[TIDE_MAX_DIMS];
    int64_t row[MAX_OPERANDS], off[MAX_OPERANDS]; /* byte offsets: the row's start, the piece's */
    int64_t inner = begin, rest = 0;
    if (p->ndim > 1) { /* 64-bit divisions cost more than a whole small op: only when needed */
        inner = begin % p->shape[0];
        rest = begin / p->shape[0];
    }
    for (int k = 0; k <= p->nin; k++)
        row[k] = 0;
    for (int d = 1; d < p->ndim; d++) {
        idx[d] = rest % p->shape[d];
        rest /= p->shape[d];
        for (int k = 0; k <= p->nin; k++)
            row[k] += idx[d] * p->stride[k][d];
    }
    for (int64_t left = end - begin;;) {
        int64_t n = min_i64(p->shape[0] - inner, left);
        for (int k = 0; k <= p->nin; k++)
            off[k] = row[k] + inner * p->stride[k][0];
        run_row(p, off, n);
        left -= n;
        if (left == 0)
            return;
        inner = 0;
        /* next row: an odometer over dims 1.. */
        for (int d = 1; d < p->ndim; d++) {
            for (int k = 0; k <= p->nin; k++)
                row[k] += p->stride[k][d];
            if (++idx[d] < p->shape[d])
                break;
            for (int k = 0; k <= p->nin; k++)
                row[k] -= p->stride[k][d] * p->shape[d];
            idx[d] = 0;
        }
    }
}

static void run_blocks(void *ctx, int64_t b0, int64_t b1)
{
    const ew_plan *p = ctx;
    run_range(p, b0 * PAR_ALIGN, min_i64(b1 * PAR_ALIGN, p->numel));
}

/* ---- tiles, for inputs read across their layout ---------------------------------------------
 * x + y^T walked row by row steps through y a whole row apart per element: a cache line and a
 * page per element, many times slower than a contiguous add. Instead out is walked in tiles of
 * TILE_ROWS rows (dim 1) by TILE_COLS columns (dim 0): each input's part of a tile is copied
 * into a buffer, reading that input along its shorter stride; one kernel call computes the
 * tile into a buffer, and its rows are copied out. Tall narrow tiles measured best: each
 * touches few pages of the transposed input, which the TLB then keeps for the whole tile. */
#define TILE_ROWS 128
#define TILE_COLS 16
/* Stack bytes for one tile of every operand; wide dtypes get fewer rows. */
#define TILE_BYTES 32768

/* Rows per tile: TILE_ROWS, or fewer (a multiple of 8) when the operands' elements are wide. */
static int64_t tile_rows(const ew_plan *p)
{
    int64_t bytes = 0;
    for (int k = 0; k <= p->nin; k++)
        bytes += p->esize[k];
    return min_i64(TILE_ROWS, TILE_BYTES / (TILE_COLS * bytes) / 8 * 8);
}

/* True when some input's innermost stride jumps more than a cache line and its dim-1 stride is
 * shorter: the transposed case, where tiles pay. */
static bool wants_tiles(const ew_plan *p)
{
    if (p->ndim < 2)
        return false;
    for (int k = 1; k <= p->nin; k++) {
        int64_t s0 = llabs(p->stride[k][0]), s1 = llabs(p->stride[k][1]);
        if (s0 > 64 && s1 < s0)
            return true;
    }
    return false;
}

/* dst[j][i] (rows of cols elements) = the element at src + i*s0 + j*s1. */
static void gather_tile(void *dst, const char *src, int64_t s0, int64_t s1, int64_t rows,
                        int64_t cols, int64_t esize)
{
    unsigned char *d = dst;
    if (llabs(s0) <= llabs(s1)) {
        for (int64_t j = 0; j < rows; j++)
            gather(d + j * cols * esize, src + j * s1, s0, cols, esize);
        return;
    }
    /* down the columns, so src is read along its shorter stride s1 */
#define GATHER_COLUMNS(T)                                                                          \
    for (int64_t i = 0; i < cols; i++)                                                             \
        for (int64_t j = 0; j < rows; j++)                                                         \
            memcpy((T *)dst + j * cols + i, src + i * s0 + j * s1, sizeof(T));
    switch (esize) {
    case 1: GATHER_COLUMNS(uint8_t) break;
    case 4: GATHER_COLUMNS(uint32_t) break;
    default: GATHER_COLUMNS(uint64_t) break;
    }
#undef GATHER_COLUMNS
}

/* One tile: columns [i0, i0+cols) of rows [j0, j0+rows), at byte offsets base[] of the dims
 * above. rows * cols elements of every operand fit in TILE_BYTES (see tile_rows). */
static void run_tile(const ew_plan *p, const int64_t *base, int64_t i0, int64_t cols, int64_t j0,
                     int64_t rows)
{
    _Alignas(64) unsigned char arena[TILE_BYTES];
    unsigned char *buf[MAX_OPERANDS];
    const void *in[MAX_INPUTS];
    int64_t used = 0;
    for (int k = 0; k <= p->nin; k++) { /* slices in 64-byte steps, so each starts aligned */
        buf[k] = arena + used;
        used += (rows * cols * p->esize[k] + 63) / 64 * 64;
    }
    for (int k = 1; k <= p->nin; k++) {
        gather_tile(buf[k], p->data[k] + base[k] + i0 * p->stride[k][0] + j0 * p->stride[k][1],
                    p->stride[k][0], p->stride[k][1], rows, cols, p->esize[k]);
        in[k - 1] = buf[k];
    }
    call_kernel(p, rows * cols, buf[0], in);
    int64_t row_bytes = cols * p->esize[0];
    char *out = p->data[0] + base[0] + i0 * p->esize[0] + j0 * p->stride[0][1];
    for (int64_t j = 0; j < rows; j++)
        memcpy(out + j * p->stride[0][1], buf[0] + j * row_bytes, (size_t)row_bytes);
}

/* Units [u0, u1): a unit is one tile's rows of dim 1 at one index of the dims above. */
static void run_tile_units(void *ctx, int64_t u0, int64_t u1)
{
    const ew_plan *p = ctx;
    int64_t n0 = p->shape[0], n1 = p->shape[1], rows = tile_rows(p);
    int64_t blocks1 = (n1 + rows - 1) / rows;
    int64_t base[MAX_OPERANDS];
    for (int64_t u = u0; u < u1; u++) {
        int64_t rest = u / blocks1, j0 = (u % blocks1) * rows;
        for (int k = 0; k <= p->nin; k++)
            base[k] = 0;
        for (int d = 2; d < p->ndim; d++) {
            int64_t idx = rest % p->shape[d];
            rest /= p->shape[d];
            for (int k = 0; k <= p->nin; k++)
                base[k] += idx * p->stride[k][d];
        }
        for (int64_t i0 = 0; i0 < n0; i0 += TILE_COLS)
            run_tile(p, base, i0, min_i64(TILE_COLS, n0 - i0), j0, min_i64(rows, n1 - j0));
    }
}

static void run_plan(const ew_plan *p, bool costly)
{
    int64_t min_par = costly ? PAR_MIN_COSTLY : PAR_MIN_CHEAP;
    if (wants_tiles(p)) {
        int64_t rows = tile_rows(p), unit = rows * p->shape[0];
        int64_t units = p->numel / (p->shape[0] * p->shape[1]) * ((p->shape[1] + rows - 1) / rows);
        if (p->numel < min_par)
            run_tile_units((void *)p, 0, units);
        else
            td_parallel_for(units, (min_par / 2 + unit - 1) / unit, run_tile_units, (void *)p);
        return;
    }
    if (p->numel < min_par) {
        run_range(p, 0, p->numel);
        return;
    }
    int64_t blocks = (p->numel + PAR_ALIGN - 1) / PAR_ALIGN;
    td_parallel_for(blocks, min_par / 2 / PAR_ALIGN, run_blocks, (void *)p);
}

/* ---- the entry points ------------------------------------------------------------------------ */

static bool unary_is_costly(tide_op op)
{
    switch (op) {
    case TIDE_OP_EXP: case TIDE_OP_LOG: case TIDE_OP_SIN: case TIDE_OP_COS: case TIDE_OP_TANH:
    case TIDE_OP_SIGMOID: case TIDE_OP_ERF: case TIDE_OP_LOG1P: case TIDE_OP_EXPM1:
    case TIDE_OP_LOG2: case TIDE_OP_TAN: case TIDE_OP_ASIN: case TIDE_OP_ACOS: case TIDE_OP_ATAN:
    case TIDE_OP_SINH: case TIDE_OP_COSH: case TIDE_OP_GELU:
        return true;
    default:
        return false;
    }
}

static int no_kernel(tide_op op, tide_dtype dtype)
{
    return td_error("%s: no CPU kernel for dtype %s", tide_op_name(op), tide_dtype_name(dtype));
}

/* The common small case: every input contiguous with out's shape (or out a single element),
 * too few elements for threads. It skips planning, so a 4-element add costs a few ns here. */
static bool small_and_flat(const tide_tensor *out, const tide_tensor *const *ins, int nin,
                           int64_t numel, bool costly)
{
    if (numel >= (costly ? PAR_MIN_COSTLY : PAR_MIN_CHEAP))
        return false;
    for (int k = 0; k < nin; k++)
        if (numel != 1 && flat_stride(ins[k], out) != 1)
            return false;
    return true;
}

int td_cpu_unary(tide_op op, tide_tensor *out, const tide_tensor *x)
{
    if (!tide_op_is_unary(op) || !td_dtype_valid(x->dtype))
        return no_kernel(op, (tide_dtype)x->dtype);
    ew_plan p;
    p.kernel.unary = kernel_table()->unary[op - TIDE_OP_FIRST_UNARY][x->dtype];
    if (!p.kernel.unary)
        return no_kernel(op, (tide_dtype)x->dtype);
    bool costly = unary_is_costly(op);
    int64_t n = numel_of(out);
    if (n > 0 && small_and_flat(out, &x, 1, n, costly))
        p.kernel.unary(n, td_tensor_data(out), td_tensor_data(x));
    else if (plan_init(&p, out, &x, 1))
        run_plan(&p, costly);
    return 0;
}

/* True when t is one element equal to 2: x ** 2 (losses, variances) is then a multiply, exact
 * where SLEEF's powf is within 1 ulp, and an order of magnitude faster. */
static bool is_single_two(const tide_tensor *t)
{
    if (numel_of(t) != 1)
        return false;
    const void *v = td_tensor_data(t);
    switch (t->dtype) {
    case TIDE_FLOAT32: return *(const float *)v == 2.0f;
    case TIDE_FLOAT64: return *(const double *)v == 2.0;
    case TIDE_INT32: return *(const int32_t *)v == 2;
    case TIDE_INT64: return *(const int64_t *)v == 2;
    case TIDE_UINT8: return *(const uint8_t *)v == 2;
    default: return false;
    }
}

int td_cpu_binary(tide_op op, tide_tensor *out, const tide_tensor *a, const tide_tensor *b)
{
    if (op == TIDE_OP_POW && is_single_two(b))
        return td_cpu_binary(TIDE_OP_MUL, out, a, a);
    if (!tide_op_is_binary(op) || !td_dtype_valid(a->dtype))
        return no_kernel(op, (tide_dtype)a->dtype);
    ew_plan p;
    p.kernel.binary = kernel_table()->binary[op - TIDE_OP_FIRST_BINARY][a->dtype];
    if (!p.kernel.binary)
        return no_kernel(op, (tide_dtype)a->dtype);
    const tide_tensor *ins[2] = {a, b};
    bool costly = op == TIDE_OP_POW && (a->dtype == TIDE_FLOAT32 || a->dtype == TIDE_FLOAT64);
    int64_t n = numel_of(out);
    if (n > 0 && small_and_flat(out, ins, 2, n, costly))
        p.kernel.binary(n, td_tensor_data(out), td_tensor_data(a), td_tensor_data(b));
    else if (plan_init(&p, out, ins, 2))
        run_plan(&p, costly);
    return 0;
}

int td_cpu_where(tide_tensor *out, const tide_tensor *cond, const tide_tensor *a,
                 const tide_tensor *b)
{
    size_t esize = td_dtype_valid(a->dtype) ? td_dtype_sizes[a->dtype] : 0;
    int slot = esize == 1 ? 0 : esize == 4 ? 2 : esize == 8 ? 3 : 1;
    ew_plan p;
    p.kernel.where = kernel_table()->where[slot];
    if (!p.kernel.where)
        return no_kernel(TIDE_OP_WHERE, (tide_dtype)a->dtype);
    const tide_tensor *ins[3] = {cond, a, b};
    if (plan_init(&p, out, ins, 3))
        run_plan(&p, false);
    return 0;
}
