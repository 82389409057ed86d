/*
 * fuzz_idx.c — fuzz target for tide_load_idx. The input is loaded as it is (plain, or gzip when
 * it starts with gzip's magic, so seeds may be real .gz files); a plain input is also gzipped
 * and loaded again, and both readings must agree: the same tensor, or both rejected. That
 * drives arbitrary IDX payloads through the decompressing path, which random bytes alone
 * would almost never reach past the CRC.
 */
#include <zlib.h>

#include "fuzz_common.h"

int tide_fuzz_idx(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_temp(0, data, size);
    tide_tensor *plain = tide_load_idx(path);
    if (!plain)
        fuzz_check_error("load_idx: ", path);
    bool gzip_input = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    if (!gzip_input) {
        const char *gzpath = fuzz_temp_path(2);
        gzFile g = gzopen(gzpath, "wb1");
        FUZZ_REQUIRE(g && (size == 0 || gzwrite(g, data, (unsigned)size) == (int)size) &&
                         gzclose(g) == Z_OK, "cannot gzip into %s", gzpath);
        tide_tensor *gz = tide_load_idx(gzpath);
        FUZZ_REQUIRE(!plain == !gz, "plain %s but gzipped %s (%s)", plain ? "loads" : "fails",
                     gz ? "loads" : "fails", tide_last_error());
        if (plain)
            fuzz_check_same(plain, gz, "gzipped IDX");
        else
            fuzz_check_error("load_idx: ", gzpath);
        tide_release(gz);
    }
    if (plain) {
        /* Touch every byte: ASan catches a tensor smaller than it claims. */
        const volatile uint8_t *p = tide_data_ptr(plain);
        size_t n = (size_t)tide_numel(plain) * tide_dtype_size(tide_get_dtype(plain));
        unsigned sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += p[i];
        (void)sum;
    }
    int ok = plain != NULL;
    tide_release(plain);
    return ok;
}

#ifndef TIDE_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tide_fuzz_idx(data, size);
    return 0;
}
#endif
