/*
 * group.h — what a device sees of the jit: the traced graph's nodes, and the fusion groups a
 * device renders and runs through the jit hooks of tide_device (core/device.h). Files under
 * devices/ include this header and core/ only (scripts/check_includes.sh checks it).
 *
 * The contract, step by step:
 *  1. While grouping, the jit asks jit_member(dev, op, dtype) whether a member of that op and
 *     operand dtype can be rendered, and jit_epilogue_rows whether a group may follow a matmul
 *     block by block, or a conv2d whole (a product's epilogue). Both may be NULL (yes, and no
 *     epilogues).
 *  2. A closed group has its domain, its slots (members in program order, then the operands
 *     read from outside) and each slot's kind of value (scalar, row, full). The jit sets every
 *     field above "the device's layout"; jit_compile(dev, plan, group, index) then lays the group
 *     out and renders it (0, or -1 with the error set: the plan fails). It may set group->code and
 *     group->source (text for TIDE_DUMP); jit_free releases them.
 *  3. jit_run(dev, plan, group, t) runs it. t[s] is slot s's tensor: an operand, a member's
 *     output tensor (allocated by the jit), the destination of a fused write-back (into >= 0),
 *     or NULL for a value kept inside. A group with a producer (a product it is the epilogue of)
 *     also gets t[nslots] = the product's result tensor and t[nslots + 1], t[nslots + 2] = its
 *     operands: the device computes the product and the group over it. Sizes and strides reach
 *     the device in these tensors at every run; a device must not assume them from compile time
 *     beyond what the plan's key fixes (shapes and layouts today; see jit/README.md).
 *  4. A device that sets jit_runtime_sizes (core/device.h) may get groups whose domain has
 *     symbolic dims (group->symbolic): one compiled group then serves every size that passes the
 *     plan's guards, so its code reads the domain, strides and row lengths from t at each run.
 */
#ifndef TIDE_JIT_GROUP_H
#define TIDE_JIT_GROUP_H

#include "../core/tensor.h"

/* ---- the traced graph --------------------------------------------------------------------- */

typedef enum jit_kind {
    JN_EXTERN,  /* a tensor from outside the trace (argument, parameter, wrapped number) */
    JN_OP,      /* a primitive producing a fresh contiguous tensor */
    JN_VIEW,    /* a view of a root node (EXTERN or OP): layout relative to the root */
    JN_INPLACE, /* COPY/FILL into in[0] (a node's tensor), srcs in in[1..] */
    JN_CONST,   /* a value computed when the graph was compiled (constant folding) */
} jit_kind;

#define JIT_MAX_IN 6

typedef struct jit_node {
    uint8_t kind;
    uint8_t dtype;
    uint8_t ndim;
    uint8_t flags; /* EXTERN: the tensor's flags (wrapped number, requires grad) */
    int op;
    int nin;
    int in[JIT_MAX_IN];
    int root;  /* VIEW: the root node; others: itself */
    int ext;   /* EXTERN: index in the externals */
    int epoch; /* how many in-place writes came before (CSE never merges across one) */
    int storage_class; /* EXTERN: the first extern sharing its storage (aliasing is in the key) */
    int64_t shape[TIDE_MAX_DIMS];
    int64_t strides[TIDE_MAX_DIMS]; /* VIEW and EXTERN: the layout */
    int64_t offset;                 /* VIEW: relative to the root's offset */
    tide_attrs attrs;
    struct tide_device *device; /* where its tensor is */
    tide_tensor *stub; /* trace time: the tensor standing for this node (a reference) */
    int where; /* traced while profiling: its source line (ops/profile.h), else 0 */
} jit_node;

/* ---- fusion groups -------------------------------------------------------------------------- */

#define JIT_GROUP_MAX_MEMBERS 48

/* Where a group member's value lives while a group runs. */
typedef enum jit_vkind { JV_SCALAR, JV_ROW, JV_FULL } jit_vkind;

/* How a group reads an input slot (jit_slot.direct). */
typedef enum jit_direct {
    JIT_GATHERED,   /* through its strides or broadcast, into scratch, per row or tile */
    JIT_IN_PLACE,   /* contiguous with the domain's shape (set by the jit) */
    JIT_PERIODIC,   /* (set by a device's jit_compile) a contiguous vector of `period` elements
                     * repeated along the domain, each row or tile inside one repeat: a row
                     * starting at element s0 reads it from s0 % period (a bias, a norm's weight) */
    JIT_TILE_CONST  /* (the CPU's) such a vector whose period divides the tile: every tile reads
                     * the same elements, gathered once per call */
} jit_direct;

/* One operand or member of a fusion group, in the group's own numbering (slot). */
typedef struct jit_slot {
    int node;     /* the graph node */
    int vkind;    /* jit_vkind */
    int member;   /* computed by the group (else an input read from outside) */
    int output;   /* a member whose value is needed outside: written to its tensor */
    int into;     /* a member written back into this node's tensor (a fused COPY), or -1 */
    int arg;      /* the group's operands and results in order (members not kept inside), or -1 */
    int es;       /* element size */
    int direct;   /* how an input (FULL) is read: jit_direct */
    int64_t period; /* JIT_PERIODIC, JIT_TILE_CONST: the repeated vector's element count */
    /* The device's layout of the slot, set by its jit_compile (the CPU's scratch plan:
     * devices/cpu/cpu_jit.c); the jit leaves them -1. */
    int64_t scratch;  /* byte offset of its buffer in the per-call scratch, or -1 */
    int64_t splat;    /* byte offset of its FULL splat buffer (a SCALAR or ROW read as FULL), or -1 */
    int64_t stream;   /* a FULL output: byte offset of the tile it is computed into before
                       * streaming stores, or -1 */
} jit_slot;

typedef struct jit_group {
    int ndim;
    int64_t domain[TIDE_MAX_DIMS];
    int64_t numel;   /* of the domain */
    int row_mode;    /* rows are the domain's leading dims, rowlen its reduced trailing dims */
    int nred;        /* trailing dims reduced (row mode) */
    int64_t rowlen;  /* elements per row (row mode) or per tile (elementwise: a power of two up to
                      * 1024, which the device's jit_compile may lower, updating nrows) */
    int64_t nrows;
    int symbolic;    /* its domain has symbolic dims: sizes are bound per run (step 4 above) */
    int domain_node; /* a node whose shape is the domain (a FULL member or a reduction's input) */
    int nslots;
    jit_slot *slots;
    int nmembers;
    int *members; /* slot indices, in program order */
    int nargs;    /* slots with an arg */
    int64_t scratch_bytes; /* the device's layout: per-thread scratch */
    /* a product (node, or -1): a matmul the group's step runs first, block by block, each block
     * followed at once by the group's rows or tiles over it: the group is the product's
     * epilogue and reads its result while the block is in cache. Blocks are the BLAS calls of
     * the device's eager matmul: block_units rows of one matrix when planned (from
     * jit_epilogue_rows; the device asks itself again at each run). Or a conv2d, run whole
     * (block_units is the device's, unused by the jit), which the device may fuse with a group
     * of its own liking */
    int producer;
    int64_t block_units;
    /* the product's result is read by this group alone (no other step, not an output): a
     * device that fuses the group into the product's own stores need not write it */
    int product_private;
    /* the device's rendering: its entry point where it has one (the CPU's generated C:
     * fn(args, row_begin, row_end, scratch)), its handle, and the text TIDE_DUMP writes */
    void (*fn)(void **args, int64_t r0, int64_t r1, char *scratch);
    void *code;
    char *source;
} jit_group;

/* What a device sees of a compiled plan. */
typedef struct jit_plan {
    uint64_t hash;         /* of the plan's key (names dumped sources) */
    int nnodes;
    const jit_node *nodes; /* after the passes: a slot's node is an index here */
    struct tide_device *device;
} jit_plan;

/* The slot of group g that holds node, or -1. */
static inline int jit_slot_of(const jit_group *g, int node)
{
    for (int s = 0; s < g->nslots; s++)
        if (g->slots[s].node == node)
            return s;
    return -1;
}

/* How a matmul's result is cut for its epilogue: nbatch matrices (the batch) of `units` rows
 * of unit_elems elements. */
void jit_product_layout(const jit_node *p, int64_t *nbatch, int64_t *units, int64_t *unit_elems);
/* Whether an op can be a member of a fusion group (elementwise, cast, where; reductions). */
int jit_op_fusible(int op);
/* Whether fusion groups are compiled (TIDE_JIT_CODEGEN=0: a device interprets them instead). */
bool jit_codegen_enabled(void);
/* TIDE_DUMP=dir: writes a group's generated source as dir/tide_jit_<plan hash>_g<index>.<ext>,
 * or with index -1 a text about the whole plan as dir/tide_jit_<plan hash>_<ext>. */
void jit_dump_source(const char *text, uint64_t hash, int index, const char *ext);
/* Milliseconds since an arbitrary origin (for compile-time log lines). */
double jit_now_ms(void);

#endif /* TIDE_JIT_GROUP_H */
