/* tensor_dict.c — the named-tensor list a checkpoint loads into: lookups and freeing. */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "tensor.h" /* td_error */

static int check(const char *op, const tide_tensor_dict *d, int i, int count)
{
    if (!d)
        return td_error("%s: dict is NULL", op);
    if (i < 0 || i >= count)
        return td_error("%s: index %d out of range for %d entries", op, i, count);
    return 0;
}

int tide_tensor_dict_count(const tide_tensor_dict *d) { return d ? d->count : 0; }

const char *tide_tensor_dict_name(const tide_tensor_dict *d, int i)
{
    return check("tensor_dict_name", d, i, d ? d->count : 0) < 0 ? NULL : d->names[i];
}

tide_tensor *tide_tensor_dict_tensor(const tide_tensor_dict *d, int i)
{
    return check("tensor_dict_tensor", d, i, d ? d->count : 0) < 0 ? NULL : d->tensors[i];
}

tide_tensor *tide_tensor_dict_find(const tide_tensor_dict *d, const char *name)
{
    if (!d || !name) {
        td_error("tensor_dict_find: %s is NULL", d ? "name" : "dict");
        return NULL;
    }
    for (int i = 0; i < d->count; i++)
        if (strcmp(d->names[i], name) == 0)
            return d->tensors[i];
    char q[120];
    td_error("tensor_dict_find: no tensor named '%s' among the %d", td_io_quote(q, sizeof q, name,
             strlen(name)), d->count);
    return NULL;
}

int tide_tensor_dict_metadata_count(const tide_tensor_dict *d) { return d ? d->nmeta : 0; }

const char *tide_tensor_dict_metadata_key(const tide_tensor_dict *d, int i)
{
    return check("tensor_dict_metadata_key", d, i, d ? d->nmeta : 0) < 0 ? NULL : d->meta_keys[i];
}

const char *tide_tensor_dict_metadata_value(const tide_tensor_dict *d, int i)
{
    return check("tensor_dict_metadata_value", d, i, d ? d->nmeta : 0) < 0 ? NULL
                                                                           : d->meta_values[i];
}

const char *tide_tensor_dict_metadata_find(const tide_tensor_dict *d, const char *key)
{
    if (!d || !key) {
        td_error("tensor_dict_metadata_find: %s is NULL", d ? "key" : "dict");
        return NULL;
    }
    for (int i = 0; i < d->nmeta; i++)
        if (strcmp(d->meta_keys[i], key) == 0)
            return d->meta_values[i];
    char q[120];
    td_error("tensor_dict_metadata_find: no metadata key '%s'",
             td_io_quote(q, sizeof q, key, strlen(key)));
    return NULL;
}

void tide_tensor_dict_free(tide_tensor_dict *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->count; i++) {
        free(d->names[i]);
        tide_release(d->tensors[i]);
    }
    for (int i = 0; i < d->nmeta; i++) {
        free(d->meta_keys[i]);
        free(d->meta_values[i]);
    }
    free(d->names);
    free(d->tensors);
    free(d->meta_keys);
    free(d->meta_values);
    free(d);
}
