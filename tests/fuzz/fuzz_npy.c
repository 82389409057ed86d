/*
 * fuzz_npy.c — fuzz target for tide_load_npy: a rejection names the function and the file; a
 * loaded tensor must come back unchanged through tide_save_npy.
 */
#include "fuzz_common.h"

int tide_fuzz_npy(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_temp(0, data, size);
    tide_tensor *t = tide_load_npy(path);
    if (!t) {
        fuzz_check_error("load_npy: ", path);
        return 0;
    }
    const char *again = fuzz_temp_path(1);
    FUZZ_REQUIRE(tide_save_npy(again, t) == 0, "save: %s", tide_last_error());
    tide_tensor *t2 = tide_load_npy(again);
    FUZZ_REQUIRE(t2, "reload: %s", tide_last_error());
    fuzz_check_same(t, t2, "npy round trip");
    tide_release(t2);
    tide_release(t);
    return 1;
}

#ifndef TIDE_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tide_fuzz_npy(data, size);
    return 0;
}
#endif
