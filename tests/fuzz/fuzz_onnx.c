/*
 * fuzz_onnx.c — fuzz target for the ONNX importer. The input is written as model.onnx in a
 * private folder (beside a fixed weights.bin, see fuzz_common.h) and opened on the CPU; a model
 * that opens is run on inputs made from its declared shapes (free dims at 1) filled with a small
 * value. Opening must either fail with an error naming onnx_open and the file (the model or its
 * external data), or succeed; running must either fail with an error naming onnx_run or the
 * node, or give every output (whose bytes are then read, so ASan sees a wrong size). Hangs,
 * leaks and giant allocations are libFuzzer's to report.
 */
#include "fuzz_common.h"

/* An input larger than this is not made (the model still opened: that counts as a pass). */
enum { FUZZ_ONNX_MAX_ELEMS = 1 << 20 };

/* Input i as declared, free dims at 1, filled with value; NULL (no error) when too large. */
static tide_tensor *make_input(const tide_onnx_model *m, int i, double value)
{
    tide_dtype dt;
    int nd;
    int64_t shape[8];
    FUZZ_REQUIRE(tide_onnx_input_info(m, i, &dt, &nd, shape, NULL, 8) == 0 && nd >= -1 &&
                 nd <= 8, "input %d: ndim %d: %s", i, nd, tide_last_error());
    if (nd < 0) { /* rank not declared: any tensor goes; a [1, 2] one */
        nd = 2;
        shape[0] = 1;
        shape[1] = 2;
    }
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        if (shape[d] < 0)
            shape[d] = 1;
        if (shape[d] > FUZZ_ONNX_MAX_ELEMS)
            return NULL;
        n *= shape[d];
        if (n > FUZZ_ONNX_MAX_ELEMS)
            return NULL;
    }
    tide_tensor *t = tide_full(nd, shape, value, dt);
    FUZZ_REQUIRE(t, "input %d (%s): %s", i, tide_dtype_name(dt), tide_last_error());
    return t;
}

/* 1 when every output came back (or an input was too large to make, so nothing ran), 0 when the
 * run failed with a proper error. */
static int run_model(tide_onnx_model *m, double value)
{
    int nin = tide_onnx_num_inputs(m), nout = tide_onnx_num_outputs(m);
    tide_tensor **in = calloc((size_t)nin + 1, sizeof *in);
    tide_tensor **out = calloc((size_t)nout + 1, sizeof *out);
    FUZZ_REQUIRE(in && out, "out of memory");
    int ok = 1, made = 1;
    for (int i = 0; i < nin && made; i++)
        made = (in[i] = make_input(m, i, value)) != NULL;
    if (made) {
        tide_clear_error();
        if (tide_onnx_run(m, in, nin, out) < 0) {
            const char *e = tide_last_error();
            FUZZ_REQUIRE(!strncmp(e, "onnx_run: ", 10) || !strncmp(e, "onnx: node ", 11),
                         "run error \"%s\"", e);
            ok = 0;
        }
    }
    for (int i = 0; i < nout; i++) {
        FUZZ_REQUIRE(!made || !ok || out[i], "output %d missing", i);
        if (out[i] && tide_is_contiguous(out[i]) && tide_numel(out[i]) > 0) {
            /* read the first and last bytes: a wrong size shows under ASan */
            const uint8_t *p = tide_data_ptr(out[i]);
            size_t nb = (size_t)tide_numel(out[i]) * tide_dtype_size(tide_get_dtype(out[i]));
            volatile uint8_t sink = p[0] ^ p[nb - 1];
            (void)sink;
        }
        tide_release(out[i]);
    }
    for (int i = 0; i < nin; i++)
        tide_release(in[i]);
    free(in);
    free(out);
    return ok;
}

int tide_fuzz_onnx(const uint8_t *data, size_t size)
{
    /* A model may ask for any size (ConstantOfShape to 2^40 elements is a valid request): tide's
     * cap turns that into an error, below libFuzzer's -malloc_limit_mb, which then catches
     * only a giant allocation outside tensors (the parser, the loader's tables). */
    tide_set_memory_limit((size_t)256 << 20);
    const char *path = fuzz_folder_write("model.onnx", data, size);
    tide_onnx_model *m = tide_onnx_open(path, "cpu");
    if (!m) {
        /* the model's path, or for external data that file's path: both in the folder */
        fuzz_check_error("onnx_open: ", fuzz_folder);
        return 0;
    }
    /* 0, 1 or 2 by the input's length: valid indices, and out of range ones for small dims */
    int ok = run_model(m, (double)(size % 3));
    tide_onnx_close(m);
    return ok;
}

#ifndef TIDE_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tide_fuzz_onnx(data, size);
    return 0;
}
#endif
