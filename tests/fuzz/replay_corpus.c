/*
 * replay_corpus.c — runs every file of the fuzz corpus (tests/fuzz/corpus/<format>/) through
 * its fuzz target, as an ordinary test program: in the sanitizer build this is the corpus under
 * ASan and UBSan, and under valgrind in scripts/test.sh, without needing clang or libFuzzer.
 * Seeds named ok_* must load and round-trip; seeds named bad_* must be rejected with an error;
 * anything else (inputs a fuzzing run found and kept) must only not crash.
 *
 * Usage: test_fuzz_corpus [corpus-dir]   (default: the source tree's tests/fuzz/corpus)
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "test_util.h"

#ifndef TIDE_FUZZ_CORPUS_DIR
#define TIDE_FUZZ_CORPUS_DIR "tests/fuzz/corpus"
#endif

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay(const char *root, const char *format, int (*target)(const uint8_t *, size_t))
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", root, format);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open the corpus folder %s", dir);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        names = realloc(names, (n + 1) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    int seeds = 0;
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        uint8_t *buf = NULL;
        long len = -1;
        if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
            fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) != NULL &&
            fread(buf, 1, (size_t)len, f) != (size_t)len)
            len = -1;
        if (f)
            fclose(f);
        CHECK(len >= 0 && buf, "cannot read %s", path);
        if (len >= 0 && buf) {
            tide_clear_error();
            int loaded = target(buf, (size_t)len);
            if (strncmp(names[i], "ok_", 3) == 0)
                CHECK(loaded == 1, "%s/%s should load: %s", format, names[i], tide_last_error());
            else if (strncmp(names[i], "bad_", 4) == 0)
                CHECK(loaded == 0, "%s/%s should be rejected", format, names[i]);
            else
                CHECK(loaded == 0 || loaded == 1, "%s/%s", format, names[i]);
            seeds++;
        }
        free(buf);
        free(names[i]);
    }
    free(names);
    CHECK(seeds > 0, "the corpus folder %s is empty", dir);
    printf("test_fuzz_corpus: %s: %d inputs\n", format, seeds);
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : TIDE_FUZZ_CORPUS_DIR;
    replay(root, "safetensors", tide_fuzz_safetensors);
    replay(root, "npy", tide_fuzz_npy);
    replay(root, "idx", tide_fuzz_idx);
    replay(root, "onnx", tide_fuzz_onnx);
    replay(root, "onnx_tensor", tide_fuzz_onnx_tensor);
    replay(root, "graph", tide_fuzz_graph);
    return test_summary("test_fuzz_corpus");
}
