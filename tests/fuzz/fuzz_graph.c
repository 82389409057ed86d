/*
 * fuzz_graph.c — fuzz target for tide_graph_load (graph files, docs/export.md). Each input is
 * loaded twice: as it is, and with the header's and meta section's checksums made to hold, so a
 * mutation of the meta section reaches the node checks instead of stopping at the checksum. A
 * rejection names the function and the file. A graph that loads runs on zero inputs of its
 * declared shapes (free dims at 2): an error is allowed there, a crash is not; saved and loaded
 * again, it gives the same outputs.
 */
#include "fuzz_common.h"

/* io/graph_file.h: the file's CRC-32C and its little-endian fields */
uint32_t td_gf_crc(const void *p, size_t n);
uint64_t td_gf_le(const uint8_t *p, int bytes);
void td_gf_put_le(uint8_t *p, uint64_t v, int bytes);

/* The header's CRC and the meta section's made to hold (where the header places it inside). */
static void fix_checksums(uint8_t *p, size_t n)
{
    if (n < 64 || memcmp(p, "TIDEGRPH", 8) != 0)
        return;
    uint64_t off = td_gf_le(p + 16, 8), len = td_gf_le(p + 24, 8);
    if (off == 64 && len <= n - 64)
        td_gf_put_le(p + 48, td_gf_crc(p + 64, (size_t)len), 4);
    td_gf_put_le(p + 56, td_gf_crc(p, 56), 4);
}

/* Runs g on zeros of its declared inputs; outs receives its outputs (contiguous), or 0. */
static int run_zeros(tide_graph *g, tide_tensor **outs, int max_outs)
{
    int nin = tide_graph_num_inputs(g), nout = tide_graph_num_outputs(g);
    if (nin > 16 || nout > max_outs)
        return 0;
    int64_t total = 0; /* inputs a run would allocate: a file may declare any size */
    tide_tensor *ins[16] = {0}, *raw[16] = {0};
    int ok = 1;
    for (int i = 0; i < nin && ok; i++) {
        tide_dtype dt;
        int nd;
        int64_t shape[8];
        ok = tide_graph_input_info(g, i, &dt, &nd, shape, 8) == 0 && nd <= 8;
        int64_t numel = 1;
        for (int d = 0; ok && d < nd; d++) {
            shape[d] = shape[d] < 0 ? 2 : shape[d];
            numel = shape[d] > (1 << 22) ? (1 << 23) : numel * shape[d];
            numel = numel > (1 << 23) ? (1 << 23) : numel;
        }
        total += numel;
        ok = ok && total <= (1 << 22) && (ins[i] = tide_zeros(nd, shape, dt)) != NULL;
    }
    ok = ok && tide_graph_run(g, ins, nin, raw) == 0;
    for (int k = 0; k < nout; k++) {
        outs[k] = ok ? tide_contiguous(raw[k]) : NULL;
        tide_release(ok ? raw[k] : NULL);
    }
    for (int i = 0; i < nin; i++)
        tide_release(ins[i]);
    return ok;
}

/* Loads path; on success runs it, and checks a save and reload gives the same outputs. */
static int load_and_run(const char *path)
{
    tide_graph *g = tide_graph_load(path, NULL);
    if (!g) {
        fuzz_check_error("load_graph: ", path);
        return 0;
    }
    tide_tensor *a[16] = {0}, *b[16] = {0};
    int nout = tide_graph_num_outputs(g);
    if (run_zeros(g, a, 16)) {
        const char *again = fuzz_temp_path(1);
        FUZZ_REQUIRE(tide_graph_save(g, again, NULL) == 0, "save: %s", tide_last_error());
        tide_graph *g2 = tide_graph_load(again, NULL);
        FUZZ_REQUIRE(g2, "reload: %s", tide_last_error());
        FUZZ_REQUIRE(run_zeros(g2, b, 16), "the reloaded graph fails: %s", tide_last_error());
        for (int k = 0; k < nout; k++)
            fuzz_check_same(a[k], b[k], "graph round trip");
        tide_graph_free(g2);
    }
    for (int k = 0; k < nout && k < 16; k++) {
        tide_release(a[k]);
        tide_release(b[k]);
    }
    tide_graph_free(g);
    return 1;
}

int tide_fuzz_graph(const uint8_t *data, size_t size)
{
    /* a graph's intermediates may be declared huge: tide refuses them under this cap with an
     * error, as it does any allocation past it */
    if (tide_get_memory_limit() == 0 || tide_get_memory_limit() > ((size_t)256 << 20))
        tide_set_memory_limit((size_t)256 << 20);
    int loaded = load_and_run(fuzz_write_temp(0, data, size));
    uint8_t *fixed = malloc(size + 1);
    FUZZ_REQUIRE(fixed, "out of memory");
    memcpy(fixed, data, size);
    fix_checksums(fixed, size);
    if (size >= 64 && memcmp(fixed, data, 64) != 0)
        load_and_run(fuzz_write_temp(0, fixed, size));
    free(fixed);
    tide_jit_cache_clear(); /* every input compiles plans of its own */
    return loaded;
}

#ifndef TIDE_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tide_fuzz_graph(data, size);
    return 0;
}
#endif
