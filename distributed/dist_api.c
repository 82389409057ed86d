/* dist_api.c — the group functions of tide.h (tide_dist_*): init, rank, size, barrier. */
#include "../core/tensor.h"
#include "dist_internal.h"

int tide_dist_init(double timeout_s) { return td_dist_init(timeout_s); }
bool tide_dist_is_initialized(void) { return td_dist_initialized(); }
bool tide_dist_available(void) { return td_dist_built_with_mpi(); }
int tide_dist_rank(void) { return td_dist_rank(); }
int tide_dist_world_size(void) { return td_dist_world(); }
int tide_dist_set_timeout(double seconds) { return td_dist_set_timeout(seconds); }

int tide_dist_barrier(void)
{
    td_coll c = {.kind = TD_COLL_BARRIER, .op = "barrier"};
    return td_dist_run(&c);
}
