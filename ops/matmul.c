/* matmul.c — placeholder until this file is written: every function reports that it is not
 * implemented yet. */
#include "dispatch.h"

tide_tensor *tide_matmul(const tide_tensor *a, const tide_tensor *b)
{
    (void)a;
    (void)b;
    td_error("matmul: not implemented yet");
    return NULL;
}
