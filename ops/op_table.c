/* op_table.c — the names of the primitive ops, in the order of core/primitive.h. */
#include "../core/primitive.h"

static const char *const op_names[TIDE_NUM_OPS] = {
#define TIDE_OP_NAME(id, name) #name,
    TIDE_ALL_OPS(TIDE_OP_NAME)
#undef TIDE_OP_NAME
};

const char *tide_op_name(tide_op op)
{
    return (op >= 0 && op < TIDE_NUM_OPS) ? op_names[op] : "unknown op";
}
