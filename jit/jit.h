/*
 * jit.h — what the files of jit/ share: the traced graph (nodes in program order), the compiled
 * plan made from it (steps, fusion groups, a memory plan), and the device's code generator for
 * fusion groups (devices/cpu/cpu_codegen.c). See jit/README.md for the design.
 */
#ifndef TIDE_JIT_H
#define TIDE_JIT_H

#include <pthread.h>

#include "../core/tensor.h"
#include "../ops/dispatch.h"

/* ---- the traced graph --------------------------------------------------------------------- */

typedef enum jit_kind {
    JN_EXTERN,  /* a tensor from outside the trace (argument, parameter, wrapped number) */
    JN_OP,      /* a primitive producing a fresh contiguous tensor */
    JN_VIEW,    /* a view of a root node (EXTERN or OP): layout relative to the root */
    JN_INPLACE, /* COPY/FILL into in[0] (a node's tensor), srcs in in[1..] */
    JN_CONST,   /* a value computed when the graph was compiled (constant folding) */
} jit_kind;

#define JIT_MAX_IN 4

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
} jit_node;

/* ---- the compiled plan -------------------------------------------------------------------- */

typedef enum jit_step_kind { JS_VIEW, JS_KERNEL, JS_INPLACE, JS_GROUP } jit_step_kind;

typedef struct jit_step {
    int kind;
    int node;  /* VIEW/KERNEL/INPLACE */
    int group; /* GROUP */
} jit_step;

/* Where a group member's value lives while a group runs. */
typedef enum jit_vkind { JV_SCALAR, JV_ROW, JV_FULL } jit_vkind;

/* One operand or member of a fusion group, in the group's own numbering (slot). */
typedef struct jit_slot {
    int node;     /* the graph node */
    int vkind;    /* jit_vkind */
    int member;   /* computed by the group (else an input read from outside) */
    int output;   /* a member whose value is needed outside: written to its tensor */
    int direct;   /* an input (FULL) that is contiguous with the domain's shape: read in place */
    int arg;      /* index into the group's argument pointers (inputs and outputs), or -1 */
    int64_t scratch;  /* byte offset of its buffer in the per-call scratch, or -1 */
    int64_t splat;    /* byte offset of its FULL splat buffer (a SCALAR or ROW read as FULL), or -1 */
    int es;       /* element size */
    int into;     /* a member written back into this node's tensor (a fused COPY), or -1 */
    int64_t stream;   /* a FULL output: byte offset of the tile or row it is computed into when
                       * the output is large, to go to memory with streaming stores; or -1 */
} jit_slot;

/* Gather descriptor for an input read through strides: the group domain's index space
 * (FULL inputs: the domain; ROW inputs: the rows) mapped to the input's elements. */
typedef struct jit_gather {
    int ndim;
    int es;
    int64_t shape[TIDE_MAX_DIMS];
    int64_t strides[TIDE_MAX_DIMS]; /* in elements, 0 on broadcast dims */
    const char *base;               /* set per run */
} jit_gather;

typedef struct jit_group {
    int ndim;
    int64_t domain[TIDE_MAX_DIMS];
    int64_t numel;   /* of the domain */
    int row_mode;    /* rows are the domain's leading dims, rowlen its reduced trailing dims */
    int nred;        /* trailing dims reduced (row mode) */
    int64_t rowlen;  /* elements per row (row mode) or per tile (elementwise) */
    int64_t nrows;
    int nslots;
    jit_slot *slots;
    int nmembers;
    int *members; /* slot indices, in program order */
    int nargs;    /* pointers the generated code receives: inputs (data or gather) then outputs */
    int64_t scratch_bytes;
    /* a product (node, or -1): a matmul the group's step runs first, block by block, each block
     * followed at once by the group's rows or tiles over it: the group is the product's
     * epilogue and reads its result while the block is in cache. Blocks are the BLAS calls of
     * the device's eager matmul: block_units rows of one matrix when planned (exec.c asks the
     * device again at each run) */
    int producer;
    int64_t block_units;
    /* the compiled code: fn(args, row_begin, row_end, scratch) */
    void (*fn)(void **args, int64_t r0, int64_t r1, char *scratch);
    void *code; /* the device's handle for fn (a TCCState) */
    char *source;
} jit_group;

typedef struct jit_compiled {
    /* key: the structural description this was compiled from */
    uint64_t hash;
    int64_t *key;
    size_t key_len;
    int nnodes;
    jit_node *nodes; /* after the passes (alias-resolved), stubs NULL */
    int *alias;      /* node -> the node whose value it has (CSE, simplification) */
    int nsteps;
    jit_step *steps;
    int ngroups;
    jit_group *groups;
    int noutputs;
    int *outputs;    /* node ids whose tensors leave the graph */
    /* memory plan: node -> byte offset in the arena, or -1 (own storage / view / extern) */
    int64_t *arena_off;
    int64_t arena_bytes;
    int *release_after; /* node -> last step that reads it (values freed after it) */
    int nconsts;
    tide_tensor **consts; /* node -> folded constant (indexed by node), NULL elsewhere */
    int nexterns;
    double compile_ms;
    struct tide_device *device; /* where it runs (a segment is on one device) */
    int refs; /* the cache, graphs, segments running it */
    struct jit_compiled *next; /* in the cache bucket */
} jit_compiled;

/* Builds the plan for nodes[0..n) with the given outputs (passes, fusion, memory plan, code
 * generation). NULL with the error set. */
jit_compiled *jit_compile(const jit_node *nodes, int n, int nexterns, const int *outputs,
                          int noutputs, uint64_t hash);
void jit_compiled_free(jit_compiled *c);
/* Runs a plan: ext are the external tensors, nodes the trace's nodes (runtime attributes:
 * RANDOM's seed and offset, FILL values). values receives a new reference per output node
 * (indexed like outputs). 0 or -1. */
int jit_execute(const jit_compiled *c, tide_tensor *const *ext, const jit_node *nodes,
                tide_tensor **out_values);

/* ---- code generation (devices/cpu/cpu_codegen.c) ------------------------------------------ */

/* Renders group g of c as C, compiles it with libtcc and sets g->fn (or leaves it NULL, so the
 * group runs through the interpreter, when codegen is off). 0 or -1. */
int td_cpu_codegen_group(const jit_compiled *c, jit_group *g, int index);
void td_cpu_codegen_free(jit_group *g);
/* The interpreter of a group's program, the same computation as the generated code. 0, or -1
 * (nothing computed) when out of memory; the caller sets the error. */
int td_cpu_group_interpret(const jit_compiled *c, const jit_group *g, void **args, int64_t r0,
                           int64_t r1, char *scratch);
/* A group's rows are split over threads in chunks of at least this many elements (64K split in
 * two, as eager's cheap ops: cpu_elementwise.c PAR_MIN_CHEAP); a group this small or smaller
 * runs on one thread. */
#define JIT_GROUP_GRAIN_ELEMS 32768
/* Rows of C per BLAS call when the CPU device runs a product of nbatch [m, k] x [k, n]
 * matrices eagerly (a batch folded into one tall product is one matrix), or 0 when it cuts C
 * by columns (cpu_matmul.c): a matmul's epilogue blocks are these calls. */
int64_t td_cpu_matmul_call_rows(int64_t nbatch, int64_t m, int64_t n, int64_t k);
/* Helpers the generated code calls (also used by the interpreter). */
/* The slot of group g that holds node, or -1. For the devices' code generators. */
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

/* Whether fusion groups are compiled (TIDE_JIT_CODEGEN=0: run member by member instead). */
bool jit_codegen_enabled(void);

/* TIDE_DUMP=dir: writes a group's generated source as dir/tide_jit_<plan hash>_g<index>.<ext>,
 * or with index -1 a text about the whole plan as dir/tide_jit_<plan hash>_<ext> (a failure is
 * logged under TIDE_LOG=jit). */
void jit_dump_source(const char *text, uint64_t hash, int index, const char *ext);

void td_jit_gather(const jit_gather *d, void *dst, int64_t begin, int64_t n);
void td_jit_splat(int64_t es, void *dst, const void *src, int64_t n);
void td_jit_stream(void *dst, const void *src, int64_t bytes);
void td_jit_stream_fence(void);
void td_jit_prefetch(const void *base, int64_t begin, int64_t n, int64_t total, int64_t es,
                     int write);
void td_jit_reduce(int op, int dtype, int odtype, void *out, const void *x, int64_t n);
void td_jit_cast(int64_t n, void *out, int odtype, const void *x, int idtype);
/* The kernel pointers a group member calls (NULL when the op has no tile kernel). */
void *td_jit_tile_kernel(int op, int dtype);

/* Whether an op can be a member of a fusion group (elementwise, cast, where; reductions). */
int jit_op_fusible(int op);

/* ---- shared state ------------------------------------------------------------------------- */

/* Milliseconds since an arbitrary origin. */
double jit_now_ms(void);
/* Where the current trace's code is (the Lua source line), or "" (for log lines). */
const char *jit_where(void);

#endif /* TIDE_JIT_H */
