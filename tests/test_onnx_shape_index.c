/*
 * test_onnx_shape_index.c — the importer's shape, movement and indexing handlers
 * (io/onnx/onnx_ops_shape.c, onnx_ops_slice.c, onnx_ops_index.c, onnx_ops_gen.c,
 * onnx_ops_select.c, onnx_ops_spectral.c) on one-node models written with tests/onnx_build.h: the corner cases the
 * ONNX backend data leave out (negative steps past the ends, crops, out-of-range index rows,
 * opset-6 attribute forms), and malformed attributes, which must be errors naming the node,
 * never crashes or wrong values. Every value compared is an integer or a copy of an input:
 * exact.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "onnx_build.h"
#include "test_util.h"
#include "tide.h"

#define MAX_ATTRS 8

/* One attribute: ints (n > 0 or is_list), one int, or a string. */
typedef struct attr_spec {
    const char *name;
    int n;
    bool is_list;
    int64_t ints[8];
    const char *s;
} attr_spec;

#define INTS(nm, cnt, ...) {.name = nm, .n = cnt, .is_list = true, .ints = {__VA_ARGS__}}
#define INT(nm, v) {.name = nm, .ints = {v}}
#define STR(nm, v) {.name = nm, .s = v}
#define NODE(o, ver, ni, no, ...)                                                              \
    {.op = o, .opset = ver, .nin = ni, .nout = no, .attrs = {__VA_ARGS__}}

typedef struct node_spec {
    const char *op;
    int opset;
    int nin, nout;
    attr_spec attrs[MAX_ATTRS];
} node_spec;

/* A model of the one node: inputs x0.. (typed and shaped by the tensors given; NULL for an
 * absent optional input), outputs y0.. (declared float32 scalars: results are not checked
 * against the declaration), written to a temporary file whose path is returned. */
static char *write_model(const node_spec *spec, tide_tensor *const *ins)
{
    static const int32_t onnx_types[] = {1, 11, 6, 7, 2, 9, 10, 16}; /* by tide_dtype */
    char names[16][16], in_list[128] = "", out_list[128] = "";
    ob_model b;
    ob_init(&b, spec->opset);
    for (int k = 0; k < spec->nin + spec->nout; k++) {
        bool in = k < spec->nin;
        snprintf(names[k], sizeof names[k], in ? "x%d" : "y%d", in ? k : k - spec->nin);
        char *list = in ? in_list : out_list;
        if ((in && k > 0) || (!in && k > spec->nin))
            strcat(list, "|");
        if (in && !ins[k])
            continue; /* "": absent */
        strcat(list, names[k]);
        if (in)
            ob_input(&b, names[k], onnx_types[tide_get_dtype(ins[k])], tide_ndim(ins[k]),
                     tide_shape(ins[k]), NULL);
        else
            ob_output(&b, names[k], 1, 0, NULL, NULL);
    }
    Onnx__NodeProto *n = ob_node(&b, spec->op, in_list, out_list);
    for (int i = 0; i < MAX_ATTRS && spec->attrs[i].name; i++) {
        const attr_spec *a = &spec->attrs[i];
        if (a->s)
            ob_attr_string(&b, n, a->name, a->s);
        else if (a->is_list)
            ob_attr_ints(&b, n, a->name, a->ints, (size_t)a->n);
        else
            ob_attr_int(&b, n, a->name, a->ints[0]);
    }
    char *path = strdup("/tmp/tide_onnx_test_XXXXXX");
    int fd = path ? mkstemp(path) : -1;
    if (fd >= 0)
        close(fd);
    bool ok = fd >= 0 && ob_write(&b, path) == 0;
    ob_free(&b);
    if (!ok) {
        if (fd >= 0)
            unlink(path);
        free(path);
        return NULL;
    }
    return path;
}

/* Runs the one-node model on ins (absent inputs NULL); outs get nout results. 0 or -1. */
static int run_node(const node_spec *spec, tide_tensor *const *ins, tide_tensor **outs)
{
    char *path = write_model(spec, ins);
    if (!path)
        return -1;
    tide_onnx_model *m = tide_onnx_open(path, NULL);
    tide_tensor *given[8];
    int n = 0;
    for (int k = 0; k < spec->nin; k++)
        if (ins[k])
            given[n++] = ins[k];
    int rc = m ? tide_onnx_run(m, given, n, outs) : -1;
    tide_onnx_close(m);
    unlink(path);
    free(path);
    return rc;
}

static tide_tensor *i64(int ndim, const int64_t *shape, const int64_t *v)
{
    return tide_from_data(v, ndim, shape, TIDE_INT64);
}

static tide_tensor *vec(int64_t n, const int64_t *v)
{
    return i64(1, &n, v);
}

/* t as int64 values equal want (n of them) with the given shape. */
static bool equals(const tide_tensor *t, int ndim, const int64_t *shape, const int64_t *want,
                   int64_t n)
{
    if (!t || tide_ndim(t) != ndim || tide_numel(t) != n)
        return false;
    for (int d = 0; d < ndim; d++)
        if (tide_shape(t)[d] != shape[d])
            return false;
    tide_tensor *w = tide_cast(t, TIDE_INT64);
    int64_t got[64];
    bool ok = w && n <= 64 && tide_to_buffer(w, got, sizeof got) == 0;
    tide_release(w);
    for (int64_t i = 0; ok && i < n; i++)
        ok = got[i] == want[i];
    return ok;
}

/* Runs spec and checks that it fails with an error holding each fragment. */
static void check_fails(const node_spec *spec, tide_tensor *const *ins, const char *frag)
{
    tide_tensor *outs[4] = {NULL};
    int rc = run_node(spec, ins, outs);
    CHECK(rc < 0 && strstr(tide_last_error(), frag) && strstr(tide_last_error(), spec->op),
          "%s: rc %d, error \"%s\" (wanted \"%s\")", spec->op, rc, tide_last_error(), frag);
    for (int k = 0; k < 4; k++)
        tide_release(outs[k]);
}

static void test_slice(void)
{
    /* x = 0..9; x[8:-100:-3] takes 8, 5, 2; an end past the start (step > 0) gives nothing */
    int64_t v[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    tide_tensor *x = vec(10, v), *st = vec(1, (int64_t[]){8}), *en = vec(1, (int64_t[]){-100});
    tide_tensor *ax = vec(1, (int64_t[]){0}), *sp = vec(1, (int64_t[]){-3});
    tide_tensor *ins[5] = {x, st, en, ax, sp}, *out = NULL;
    node_spec s = NODE("Slice", 13, 5, 1);
    CHECK(run_node(&s, ins, &out) == 0 && equals(out, 1, (int64_t[]){3}, (int64_t[]){8, 5, 2}, 3),
          "Slice 8:-100:-3: %s", tide_last_error());
    tide_release(out);
    out = NULL;
    node_spec s6 = NODE("Slice", 6, 1, 1, INTS("starts", 1, 7), INTS("ends", 1, 3));
    CHECK(run_node(&s6, ins, &out) == 0 && equals(out, 1, (int64_t[]){0}, NULL, 0),
          "Slice opset 6, 7:3: %s", tide_last_error());
    tide_release(out);
    tide_tensor *zero = vec(1, (int64_t[]){0});
    ins[4] = zero;
    check_fails(&s, ins, "step");
    tide_tensor *ax9 = vec(1, (int64_t[]){9});
    ins[3] = ax9;
    ins[4] = sp;
    check_fails(&s, ins, "axis 9");
    tide_tensor *tmp[] = {x, st, en, ax, sp, zero, ax9};
    for (int i = 0; i < 7; i++)
        tide_release(tmp[i]);
}

static void test_split_pad(void)
{
    int64_t v[6] = {0, 1, 2, 3, 4, 5};
    tide_tensor *x = vec(6, v), *outs[3] = {NULL};
    node_spec s = NODE("Split", 6, 1, 2, INTS("split", 2, 4, 2));
    CHECK(run_node(&s, &x, outs) == 0 && equals(outs[0], 1, (int64_t[]){4}, v, 4) &&
              equals(outs[1], 1, (int64_t[]){2}, v + 4, 2),
          "Split opset 6 [4, 2]: %s", tide_last_error());
    for (int k = 0; k < 3; k++)
        tide_release(outs[k]), outs[k] = NULL;
    node_spec s18 = NODE("Split", 18, 1, 3, INT("num_outputs", 3));
    tide_tensor *x4 = vec(4, v);
    CHECK(run_node(&s18, &x4, outs) == 0 && equals(outs[2], 1, (int64_t[]){0}, NULL, 0) &&
              equals(outs[1], 1, (int64_t[]){2}, v + 2, 2),
          "Split opset 18, 4 into 3: %s", tide_last_error());
    for (int k = 0; k < 3; k++)
        tide_release(outs[k]), outs[k] = NULL;
    node_spec bad = NODE("Split", 6, 1, 2, INTS("split", 2, 4, 3));
    check_fails(&bad, &x, "add up to 7");
    /* Pad: a crop at the front, 2 edge copies at the back */
    node_spec p = NODE("Pad", 6, 1, 1, INTS("pads", 2, -2, 2), STR("mode", "edge"));
    tide_tensor *out = NULL;
    CHECK(run_node(&p, &x, &out) == 0 &&
              equals(out, 1, (int64_t[]){6}, (int64_t[]){2, 3, 4, 5, 5, 5}, 6),
          "Pad opset 6 crop and edge: %s", tide_last_error());
    tide_release(out);
    node_spec p1 = NODE("Pad", 1, 1, 1, INTS("paddings", 2, 1, 0), STR("mode", "reflect"));
    out = NULL;
    CHECK(run_node(&p1, &x, &out) == 0 &&
              equals(out, 1, (int64_t[]){7}, (int64_t[]){1, 0, 1, 2, 3, 4, 5}, 7),
          "Pad opset 1 reflect: %s", tide_last_error());
    tide_release(out);
    /* Split opset 1 takes the sizes as an input; Tile before opset 6 one count for one axis */
    tide_tensor *sizes = vec(2, (int64_t[]){1, 5}), *sp_in[2] = {x, sizes};
    node_spec s1 = NODE("Split", 1, 2, 2);
    CHECK(run_node(&s1, sp_in, outs) == 0 && equals(outs[0], 1, (int64_t[]){1}, v, 1) &&
              equals(outs[1], 1, (int64_t[]){5}, v + 1, 5),
          "Split opset 1 [1, 5]: %s", tide_last_error());
    for (int k = 0; k < 2; k++)
        tide_release(outs[k]), outs[k] = NULL;
    tide_tensor *two = vec(1, (int64_t[]){2}), *zero = vec(1, (int64_t[]){0});
    tide_tensor *tile_in[3] = {sizes, two, zero};
    node_spec t5 = NODE("Tile", 5, 3, 1);
    out = NULL;
    CHECK(run_node(&t5, tile_in, &out) == 0 &&
              equals(out, 1, (int64_t[]){4}, (int64_t[]){1, 5, 1, 5}, 4),
          "Tile opset 5: %s", tide_last_error());
    tide_release(out);
    tide_release(sizes);
    tide_release(two);
    tide_release(zero);
    node_spec pc = NODE("Pad", 6, 1, 1, INTS("pads", 2, -5, -2));
    check_fails(&pc, &x, "crop away");
    node_spec pm = NODE("Pad", 6, 1, 1, INTS("pads", 2, 1, 1), STR("mode", "odd"));
    check_fails(&pm, &x, "mode 'odd'");
    tide_release(x);
    tide_release(x4);
}

static void test_nd(void)
{
    /* data [2, 3]; index rows (1, 2), (-1, 0) and one whose column 3 is out of range: its
     * linear index (1*3 + 3 = 6) would land past the end, but (0, 3) = 3 would silently read
     * row 1 without the per-entry check */
    int64_t d[6] = {10, 11, 12, 13, 14, 15};
    tide_tensor *data = i64(2, (int64_t[]){2, 3}, d);
    tide_tensor *good = i64(2, (int64_t[]){2, 2}, (int64_t[]){1, 2, -1, 0});
    tide_tensor *bad = i64(2, (int64_t[]){1, 2}, (int64_t[]){0, 3});
    tide_tensor *ins[3] = {data, good, NULL}, *out = NULL;
    node_spec g = NODE("GatherND", 13, 2, 1);
    CHECK(run_node(&g, ins, &out) == 0 &&
              equals(out, 1, (int64_t[]){2}, (int64_t[]){15, 13}, 2),
          "GatherND: %s", tide_last_error());
    tide_release(out);
    ins[1] = bad;
    check_fails(&g, ins, "GatherND");
    tide_tensor *upd = vec(1, (int64_t[]){99});
    ins[2] = upd;
    node_spec sc = NODE("ScatterND", 16, 3, 1);
    check_fails(&sc, ins, "ScatterND");
    tide_tensor *upd2 = vec(2, (int64_t[]){1, 2});
    ins[2] = upd2;
    check_fails(&sc, ins, "updates must have");
    tide_release(upd2);
    ins[2] = upd;
    node_spec gb = NODE("GatherND", 13, 2, 1, INT("batch_dims", 2));
    ins[1] = good;
    check_fails(&gb, ins, "batch_dims is 2");
    tide_release(data);
    tide_release(good);
    tide_release(bad);
    tide_release(upd);
}

static void test_unique_reverse(void)
{
    /* unsorted: values in order of first occurrence, with their first index and counts */
    int64_t v[6] = {3, 1, 3, 2, 1, 3};
    tide_tensor *x = vec(6, v), *outs[4] = {NULL};
    node_spec u = NODE("Unique", 11, 1, 4, INT("sorted", 0));
    CHECK(run_node(&u, &x, outs) == 0 &&
              equals(outs[0], 1, (int64_t[]){3}, (int64_t[]){3, 1, 2}, 3) &&
              equals(outs[1], 1, (int64_t[]){3}, (int64_t[]){0, 1, 3}, 3) &&
              equals(outs[2], 1, (int64_t[]){6}, (int64_t[]){0, 1, 0, 2, 1, 0}, 6) &&
              equals(outs[3], 1, (int64_t[]){3}, (int64_t[]){3, 2, 1}, 3),
          "Unique unsorted: %s", tide_last_error());
    for (int k = 0; k < 4; k++)
        tide_release(outs[k]);
    /* ReverseSequence [time 3, batch 2], lengths 3 and 1 */
    tide_tensor *seq = i64(2, (int64_t[]){3, 2}, (int64_t[]){0, 1, 2, 3, 4, 5});
    tide_tensor *lens = vec(2, (int64_t[]){3, 1}), *ins[2] = {seq, lens}, *out = NULL;
    node_spec r = NODE("ReverseSequence", 10, 2, 1);
    CHECK(run_node(&r, ins, &out) == 0 &&
              equals(out, 2, (int64_t[]){3, 2}, (int64_t[]){4, 1, 2, 3, 0, 5}, 6),
          "ReverseSequence: %s", tide_last_error());
    tide_release(out);
    tide_tensor *long_lens = vec(2, (int64_t[]){4, 1});
    ins[1] = long_lens;
    check_fails(&r, ins, "outside [0, 3]");
    tide_release(x);
    tide_release(seq);
    tide_release(lens);
    tide_release(long_lens);
}

static void test_bad_attributes(void)
{
    tide_tensor *x = i64(4, (int64_t[]){1, 4, 2, 2}, (int64_t[16]){0});
    node_spec d2s = NODE("DepthToSpace", 13, 1, 1, INT("blocksize", 3));
    check_fails(&d2s, &x, "do not split into blocks");
    node_spec huge = NODE("SpaceToDepth", 13, 1, 1, INT("blocksize", INT64_MAX));
    check_fails(&huge, &x, "blocksize");
    node_spec rs = NODE("Reshape", 4, 1, 1, INTS("shape", 2, 5, -1));
    tide_tensor *out = NULL;
    check_fails(&rs, &x, "Reshape");
    node_spec rs1 = NODE("Reshape", 4, 1, 1, INTS("shape", 2, 8, -1));
    CHECK(run_node(&rs1, &x, &out) == 0 && tide_ndim(out) == 2 && tide_shape(out)[1] == 2,
          "Reshape opset 4: %s", tide_last_error());
    tide_release(out);
    tide_tensor *shape = vec(2, (int64_t[]){3, 4}), *ins[2] = {x, shape};
    node_spec e = NODE("Expand", 13, 2, 1);
    check_fails(&e, ins, "does not broadcast");
    tide_tensor *depth = vec(1, (int64_t[]){0}), *vals = vec(2, (int64_t[]){0, 1});
    tide_tensor *oh[3] = {shape, depth, vals};
    node_spec o = NODE("OneHot", 11, 3, 1);
    check_fails(&o, oh, "depth 0");
    tide_tensor *boxes = tide_zeros(3, (int64_t[]){1, 2, 3}, TIDE_FLOAT32);
    tide_tensor *scores = tide_zeros(3, (int64_t[]){1, 1, 2}, TIDE_FLOAT32);
    tide_tensor *nms_in[2] = {boxes, scores};
    node_spec nms = NODE("NonMaxSuppression", 11, 2, 1);
    check_fails(&nms, nms_in, "boxes must be [B, N, 4]");
    tide_release(boxes);
    tide_release(scores);
    /* a 0-D input has no axis to index; float indices are not truncated into integers */
    tide_tensor *scalar = tide_from_data((int64_t[]){7}, 0, NULL, TIDE_INT64);
    tide_tensor *fidx = tide_zeros(1, (int64_t[]){1}, TIDE_FLOAT32);
    tide_tensor *ge0[2] = {scalar, scalar}, *gef[2] = {shape, fidx};
    node_spec ge = NODE("GatherElements", 13, 2, 1);
    check_fails(&ge, ge0, "0-D");
    check_fails(&ge, gef, "float32; it must be int32 or int64");
    node_spec sp = NODE("Split", 13, 1, 2);
    check_fails(&sp, &scalar, "0-D");
    tide_release(scalar);
    tide_release(fidx);
    /* DFT wants a last dim of 1 (real) or 2 (complex); STFT a window or a frame_length */
    tide_tensor *sig = tide_zeros(3, (int64_t[]){1, 8, 3}, TIDE_FLOAT32);
    node_spec dft = NODE("DFT", 17, 1, 1);
    check_fails(&dft, &sig, "1 (real) or 2 (complex)");
    tide_tensor *sig1 = tide_zeros(3, (int64_t[]){1, 8, 1}, TIDE_FLOAT32);
    tide_tensor *step = tide_from_data((int64_t[]){2}, 0, NULL, TIDE_INT64);
    tide_tensor *stft_in[2] = {sig1, step};
    node_spec stft = NODE("STFT", 17, 2, 1);
    check_fails(&stft, stft_in, "needs a window or a frame_length");
    tide_release(sig);
    tide_release(sig1);
    /* TfIdfVectorizer: unigrams 1 and 2 count into 0 and 2, the bigram (2, 3) into 1; the
     * pool's sections must hold whole n-grams */
    tide_tensor *tokens = vec(3, (int64_t[]){2, 2, 3});
    node_spec tf = NODE("TfIdfVectorizer", 9, 1, 1, STR("mode", "TF"),
                        INTS("pool_int64s", 4, 1, 2, 2, 3), INTS("ngram_counts", 2, 0, 2),
                        INTS("ngram_indexes", 3, 0, 2, 1), INT("min_gram_length", 1),
                        INT("max_gram_length", 2));
    tide_tensor *counts = NULL;
    CHECK(run_node(&tf, &tokens, &counts) == 0 &&
              equals(counts, 1, (int64_t[]){3}, (int64_t[]){0, 1, 2}, 3),
          "TfIdfVectorizer: %s", tide_last_error());
    tf.attrs[2] = (attr_spec)INTS("ngram_counts", 2, 0, 1);
    check_fails(&tf, &tokens, "does not split pool_int64s");
    tide_release(counts);
    tide_release(tokens);
    tide_release(step);
    tide_release(x);
    tide_release(shape);
    tide_release(depth);
    tide_release(vals);
}

int main(void)
{
    test_slice();
    test_split_pad();
    test_nd();
    test_unique_reverse();
    test_bad_attributes();
    return test_summary("test_onnx_shape_index");
}
