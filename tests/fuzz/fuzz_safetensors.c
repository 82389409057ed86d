/*
 * fuzz_safetensors.c — fuzz target for tide_load_safetensors. An input either is rejected with
 * an error naming the function and the file, or loads; a loaded file must survive a round trip
 * through tide_save_safetensors with the same names, metadata, dtypes, shapes and bytes.
 */
#include "fuzz_common.h"

int tide_fuzz_safetensors(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_temp(0, data, size);
    tide_tensor_dict *d = tide_load_safetensors(path);
    if (!d) {
        fuzz_check_error("load_safetensors: ", path);
        return 0;
    }
    int n = tide_tensor_dict_count(d), nm = tide_tensor_dict_metadata_count(d);
    const char **names = malloc((size_t)(n + 1) * sizeof *names);
    tide_tensor **ts = malloc((size_t)(n + 1) * sizeof *ts);
    const char **kv = malloc((size_t)(2 * nm + 1) * sizeof *kv);
    FUZZ_REQUIRE(names && ts && kv, "out of memory");
    for (int i = 0; i < n; i++) {
        names[i] = tide_tensor_dict_name(d, i);
        ts[i] = tide_tensor_dict_tensor(d, i);
        FUZZ_REQUIRE(names[i] && ts[i], "entry %d", i);
    }
    for (int i = 0; i < nm; i++) {
        kv[2 * i] = tide_tensor_dict_metadata_key(d, i);
        kv[2 * i + 1] = tide_tensor_dict_metadata_value(d, i);
    }
    const char *again = fuzz_temp_path(1);
    FUZZ_REQUIRE(tide_save_safetensors(again, names, ts, n, kv, nm) == 0, "save: %s",
                 tide_last_error());
    tide_tensor_dict *d2 = tide_load_safetensors(again);
    FUZZ_REQUIRE(d2, "reload: %s", tide_last_error());
    FUZZ_REQUIRE(tide_tensor_dict_count(d2) == n && tide_tensor_dict_metadata_count(d2) == nm,
                 "counts changed");
    for (int i = 0; i < n; i++)
        fuzz_check_same(ts[i], tide_tensor_dict_find(d2, names[i]), names[i]);
    for (int i = 0; i < nm; i++) {
        const char *v = tide_tensor_dict_metadata_find(d2, kv[2 * i]);
        FUZZ_REQUIRE(v && strcmp(v, kv[2 * i + 1]) == 0, "metadata '%s' changed", kv[2 * i]);
    }
    tide_tensor_dict_free(d2);
    free(names);
    free(ts);
    free(kv);
    tide_tensor_dict_free(d);
    return 1;
}

#ifndef TIDE_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tide_fuzz_safetensors(data, size);
    return 0;
}
#endif
