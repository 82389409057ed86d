/*
 * fuzz_common.h — what the fuzz targets share. The loaders take paths (that is the API Lua and C
 * applications use, and it covers the fstat-based size checks), so each input is written to a
 * per-process temporary file first; FUZZ_REQUIRE turns a broken invariant into a crash that
 * libFuzzer (or the corpus replay) reports.
 */
#ifndef TIDE_FUZZ_COMMON_H
#define TIDE_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tide.h"

#define FUZZ_REQUIRE(cond, ...)                                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The fuzz entry points, one per loader: 1 when the input loaded (and passed the round-trip
 * checks), 0 when it was rejected with an error. */
int tide_fuzz_safetensors(const uint8_t *data, size_t size);
int tide_fuzz_npy(const uint8_t *data, size_t size);
int tide_fuzz_idx(const uint8_t *data, size_t size);
int tide_fuzz_onnx(const uint8_t *data, size_t size);
int tide_fuzz_onnx_tensor(const uint8_t *data, size_t size);
int tide_fuzz_graph(const uint8_t *data, size_t size);

enum { FUZZ_NFILES = 3 };
static char fuzz_paths[FUZZ_NFILES][96];

static inline void fuzz_remove_files(void)
{
    for (int i = 0; i < FUZZ_NFILES; i++)
        if (fuzz_paths[i][0])
            unlink(fuzz_paths[i]);
}

/* Temporary file number i of this process (created once, removed at exit). */
static inline const char *fuzz_temp_path(int i)
{
    if (!fuzz_paths[i][0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_paths[i], sizeof fuzz_paths[i], "%s/tide_fuzz_XXXXXX",
                 dir && strlen(dir) < 60 ? dir : "/tmp");
        int fd = mkstemp(fuzz_paths[i]);
        FUZZ_REQUIRE(fd >= 0, "cannot create a temporary file in %s", fuzz_paths[i]);
        close(fd);
        static int registered;
        if (!registered++)
            atexit(fuzz_remove_files);
    }
    return fuzz_paths[i];
}

static inline const char *fuzz_write_temp(int i, const uint8_t *data, size_t size)
{
    const char *p = fuzz_temp_path(i);
    FILE *f = fopen(p, "wb");
    FUZZ_REQUIRE(f && (size == 0 || fwrite(data, 1, size, f) == size) && fclose(f) == 0,
                 "cannot write %s", p);
    return p;
}

/* The ONNX targets write into a private folder (made once per program, removed at exit) that
 * also holds a fixed weights.bin (bytes 0..63), so external data has a known file inside the
 * model's folder and nothing else of /tmp is in reach. fuzz_folder_write(name, ...) writes
 * folder/name (name: "model.onnx" or "tensor.pb") and returns its path. */
static char fuzz_folder[96];
static const char *const fuzz_folder_names[] = {"model.onnx", "tensor.pb", "weights.bin"};

static inline void fuzz_folder_remove(void)
{
    char p[160];
    for (size_t i = 0; i < sizeof fuzz_folder_names / sizeof *fuzz_folder_names; i++) {
        snprintf(p, sizeof p, "%s/%s", fuzz_folder, fuzz_folder_names[i]);
        unlink(p);
    }
    rmdir(fuzz_folder);
}

static inline const char *fuzz_folder_write(const char *name, const uint8_t *data, size_t size)
{
    static char path[160];
    if (!fuzz_folder[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_folder, sizeof fuzz_folder, "%s/tide_fuzz_XXXXXX",
                 dir && strlen(dir) < 60 ? dir : "/tmp");
        FUZZ_REQUIRE(mkdtemp(fuzz_folder) != NULL, "cannot create a folder %s", fuzz_folder);
        atexit(fuzz_folder_remove);
        uint8_t w[64];
        for (int i = 0; i < 64; i++)
            w[i] = (uint8_t)i;
        fuzz_folder_write("weights.bin", w, sizeof w);
    }
    snprintf(path, sizeof path, "%s/%s", fuzz_folder, name);
    FILE *f = fopen(path, "wb");
    FUZZ_REQUIRE(f && (size == 0 || fwrite(data, 1, size, f) == size) && fclose(f) == 0,
                 "cannot write %s", path);
    return path;
}

/* A rejection must say which function failed and on which file. */
static inline void fuzz_check_error(const char *op, const char *path)
{
    const char *e = tide_last_error();
    FUZZ_REQUIRE(strncmp(e, op, strlen(op)) == 0 && strstr(e, path), "error \"%s\"", e);
}

/* Same dtype, shape and bytes; reading every byte also lets ASan catch a wrong size. */
static inline void fuzz_check_same(const tide_tensor *a, const tide_tensor *b, const char *what)
{
    FUZZ_REQUIRE(a && b, "%s: missing tensor", what);
    FUZZ_REQUIRE(tide_get_dtype(a) == tide_get_dtype(b) && tide_ndim(a) == tide_ndim(b),
                 "%s: dtype or ndim changed", what);
    for (int i = 0; i < tide_ndim(a); i++)
        FUZZ_REQUIRE(tide_size(a, i) == tide_size(b, i), "%s: size of dim %d changed", what, i);
    FUZZ_REQUIRE(tide_is_contiguous(a) && tide_is_contiguous(b), "%s: not contiguous", what);
    size_t n = (size_t)tide_numel(a) * tide_dtype_size(tide_get_dtype(a));
    FUZZ_REQUIRE(n == 0 || memcmp(tide_data_ptr(a), tide_data_ptr(b), n) == 0,
                 "%s: bytes changed", what);
    if (tide_get_dtype(a) == TIDE_BOOL) {
        const uint8_t *p = tide_data_ptr(a);
        for (size_t i = 0; i < n; i++)
            FUZZ_REQUIRE(p[i] <= 1, "%s: bool byte %u", what, p[i]);
    }
}

#endif /* TIDE_FUZZ_COMMON_H */
