/*
 * ltide_model.h — a callable model object in Lua over anything with named inputs and outputs
 * and a run (an ONNX model, a loaded graph): what ltide_model.c makes of a table of functions.
 *   model(x, y, ...)           -> its outputs, in order
 *   model{name = tensor, ...}  -> {output name = tensor, ...}
 *   model.input_names, model.output_names   (lists of names)
 *   model.inputs, model.outputs             ({name=, dtype=, shape={...}} each; a free dim is
 *                                            its name, or -1 when unnamed)
 *   model.metadata                          ({key = value} strings, where the model has them)
 *   model:close()
 */
#ifndef LTIDE_MODEL_H
#define LTIDE_MODEL_H

#include "ltide.h"

typedef struct lt_model_ops {
    const char *what; /* "onnx model", "graph": messages start with it */
    int (*num_io)(const void *m, bool output);
    const char *(*name)(const void *m, int i, bool output);
    /* dtype, ndim and shape (TIDE_MAX_DIMS), each free dim -1 with its name in dims or NULL;
     * -1 when the model declares no type */
    int (*info)(const void *m, int i, bool output, tide_dtype *dtype, int *ndim, int64_t *shape,
                const char **dims);
    int (*run)(void *m, tide_tensor *const *ins, int nin, tide_tensor **outs);
    void (*close)(void *m);
    /* string metadata: its count and key i's; the value of a key (NULL: the model has none) */
    int (*num_meta)(const void *m);
    const char *(*meta_key)(const void *m, int i);
    const char *(*meta)(const void *m, const char *key);
} lt_model_ops;

/* Pushes a model object owning m (closed by its __gc). m NULL: raises tide's error, naming
 * who. */
int lt_push_model(lua_State *L, void *m, const lt_model_ops *ops, const char *who);
/* Registers the model metatable (once, from lt_open_onnx). */
void lt_open_model(lua_State *L, int mt);

#endif /* LTIDE_MODEL_H */
