/*
 * fuzz_onnx_tensor.c — fuzz target for tide_onnx_load_tensor (a TensorProto .pb file, as the ONNX
 * test data store tensors): a rejection names the function and the file; a loaded tensor has
 * at most 8 dims and every byte readable (ASan catches a wrong size), bools are 0 or 1.
 */
#include "fuzz_common.h"

static volatile unsigned tensor_sink; /* so the reads are not optimized away */

int tide_fuzz_onnx_tensor(const uint8_t *data, size_t size)
{
    const char *path = fuzz_folder_write("tensor.pb", data, size);
    tide_tensor *t = tide_onnx_load_tensor(path);
    if (!t) {
        fuzz_check_error("onnx_load_tensor: ", path);
        return 0;
    }
    FUZZ_REQUIRE(tide_ndim(t) >= 0 && tide_ndim(t) <= 8 && tide_is_contiguous(t),
                 "ndim %d", tide_ndim(t));
    size_t nb = (size_t)tide_numel(t) * tide_dtype_size(tide_get_dtype(t));
    const uint8_t *p = tide_data_ptr(t);
    for (size_t i = 0; i < nb; i++)
        tensor_sink += p[i];
    if (tide_get_dtype(t) == TIDE_BOOL)
        for (size_t i = 0; i < nb; i++)
            FUZZ_REQUIRE(p[i] <= 1, "bool byte %u", p[i]);
    tide_release(t);
    return 1;
}

#ifndef TIDE_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tide_fuzz_onnx_tensor(data, size);
    return 0;
}
#endif
