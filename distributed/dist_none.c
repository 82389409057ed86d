/*
 * dist_none.c — the transport when tide is built without MPI (CMake found none): every
 * collective fails with an error that says how to get one.
 */
#include "../core/tensor.h"
#include "dist_internal.h"

td_dist_state td_dist = {.rank = -1, .world = -1};

bool td_dist_built_with_mpi(void) { return false; }

int td_dist_init(double timeout_s)
{
    (void)timeout_s;
    return td_error_code(TIDE_ERR_UNSUPPORTED,
                         "distributed.init: this tide was built without MPI (install "
                         "libopenmpi-dev, then configure and build again)");
}

int td_dist_exec(const td_coll *c)
{
    return td_error_code(TIDE_ERR_UNSUPPORTED, "%s: this tide was built without MPI", c->op);
}


void tide_dist_abort(int code) { (void)code; }
