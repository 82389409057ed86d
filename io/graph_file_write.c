/*
 * graph_file_write.c — tide_graph_save: a compiled graph into one file (graph_file.h,
 * docs/export.md): its nodes, names and dynamic dims in the meta section, the tensors it
 * captured (weights) as aligned blobs in the data section, each with a CRC-32C.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/tide_internal.h"
#include "graph_file.h"

static uint64_t align_up(uint64_t n) { return (n + TD_GRAPH_ALIGN - 1) / TD_GRAPH_ALIGN * TD_GRAPH_ALIGN; }

/* A blob's bytes on the host: its own on the CPU, else a copy in *owned (freed by the caller).
 * NULL with the error set. */
static const void *blob_bytes(const tide_tensor *b, size_t n, void **owned)
{
    *owned = NULL;
    const void *p = tide_data_ptr(b);
    if (p || n == 0)
        return p ? p : "";
    if (!(*owned = td_malloc(n))) {
        td_error("save_graph: out of memory (%zu bytes to read a weight back)", n);
        return NULL;
    }
    if (tide_to_buffer(b, *owned, n) < 0) {
        free(*owned);
        *owned = NULL;
    }
    return *owned;
}

static void write_node(td_io_buf *m, const td_graph_node *n)
{
    td_gf_u8(m, (unsigned)n->kind);
    td_gf_u8(m, (unsigned)n->dtype);
    td_gf_u8(m, (unsigned)n->ndim);
    td_gf_u8(m, (unsigned)n->flags);
    td_gf_u8(m, n->on_host);
    td_gf_str(m, n->kind == TD_GN_EXTERN ? "" : tide_op_name((tide_op)n->op));
    td_gf_u8(m, (unsigned)n->nin);
    for (int j = 0; j < n->nin; j++)
        td_gf_u32(m, (uint32_t)n->in[j]);
    td_gf_u32(m, (uint32_t)n->root);
    td_gf_u32(m, (uint32_t)n->ext);
    for (int d = 0; d < n->ndim; d++)
        td_gf_u64(m, (uint64_t)n->shape[d]);
    for (int d = 0; d < n->ndim; d++)
        td_gf_u64(m, (uint64_t)n->strides[d]);
    td_gf_u64(m, (uint64_t)n->offset);
    td_gf_u8(m, (unsigned)n->attrs.nints);
    for (int k = 0; k < n->attrs.nints; k++)
        td_gf_u64(m, (uint64_t)n->attrs.ints[k]);
    for (int k = 0; k < 3; k++)
        td_gf_f64(m, n->attrs.values[k]);
    td_gf_u8(m, n->attrs.keepdim);
}

/* The names: the caller's, else the graph's ("input0"...); a dynamic dim's name where the
 * graph has one. */
static void write_names(td_io_buf *m, const tide_graph *g, const td_graph_desc *d,
                        const tide_graph_save_options *o)
{
    td_gf_u32(m, (uint32_t)d->ninputs);
    for (int i = 0; i < d->ninputs; i++) {
        td_gf_str(m, o && o->input_names ? o->input_names[i] : tide_graph_input_name(g, i));
        uint32_t mask = d->dyn ? d->dyn[i] : 0;
        td_gf_u32(m, mask);
        for (int k = 0; k < 32; k++)
            if (mask >> k & 1)
                td_gf_str(m, tide_graph_dim_name(g, i, k));
    }
    td_gf_u32(m, (uint32_t)d->noutputs);
    for (int i = 0; i < d->noutputs; i++) {
        td_gf_str(m, o && o->output_names ? o->output_names[i] : tide_graph_output_name(g, i));
        td_gf_u32(m, (uint32_t)d->out_node[i]);
    }
}

static void write_meta(td_io_buf *m, const tide_graph *g, const td_graph_desc *d,
                       const tide_graph_save_options *o, const uint64_t *off,
                       const uint32_t *crc)
{
    td_gf_str(m, d->device);
    int nmeta = o && o->metadata ? o->nmetadata : tide_graph_num_metadata(g);
    td_gf_u32(m, (uint32_t)nmeta);
    for (int i = 0; i < nmeta; i++) {
        const char *key = o && o->metadata ? o->metadata[2 * i] : tide_graph_metadata_key(g, i);
        td_gf_str(m, key);
        td_gf_str(m, o && o->metadata ? o->metadata[2 * i + 1] : tide_graph_metadata(g, key));
    }
    write_names(m, g, d, o);
    td_gf_u32(m, (uint32_t)d->nblobs);
    for (int b = 0; b < d->nblobs; b++) {
        td_gf_u8(m, tide_get_dtype(d->blobs[b]));
        td_gf_u64(m, off[b]);
        td_gf_u64(m, (uint64_t)tide_numel(d->blobs[b]) * tide_dtype_size(tide_get_dtype(d->blobs[b])));
        td_gf_u32(m, crc[b]);
    }
    td_gf_u32(m, (uint32_t)d->nexterns);
    for (int e = 0; e < d->nexterns; e++)
        td_gf_u32(m, (uint32_t)(d->ext_blob[e] + 1));
    td_gf_u32(m, (uint32_t)d->nnodes);
    for (int k = 0; k < d->nnodes; k++)
        write_node(m, &d->nodes[k]);
}

static size_t blob_size(const tide_tensor *b)
{
    return (size_t)tide_numel(b) * tide_dtype_size(tide_get_dtype(b));
}

/* Each blob's offset in the data section and its CRC (read once here, once to write). */
static uint64_t plan_data(const td_graph_desc *d, uint64_t *off, uint32_t *crc, int *rc)
{
    uint64_t at = 0, end = 0;
    for (int b = 0; b < d->nblobs && *rc == 0; b++) {
        size_t n = blob_size(d->blobs[b]);
        void *owned;
        const void *p = blob_bytes(d->blobs[b], n, &owned);
        if (!p) {
            *rc = -1;
            break;
        }
        crc[b] = td_gf_crc(p, n);
        free(owned);
        off[b] = at;
        end = at + n;
        at = align_up(end);
    }
    return end;
}

static int write_blobs(const td_io_ctx *c, FILE *f, const td_graph_desc *d, const uint64_t *off)
{
    static const uint8_t zeros[TD_GRAPH_ALIGN];
    uint64_t at = 0;
    for (int b = 0; b < d->nblobs; b++) {
        size_t n = blob_size(d->blobs[b]);
        void *owned;
        const void *p = blob_bytes(d->blobs[b], n, &owned);
        int rc = p ? 0 : -1;
        if (rc == 0 && off[b] > at)
            rc = td_io_write(c, f, zeros, (size_t)(off[b] - at));
        if (rc == 0)
            rc = td_io_write(c, f, p, n);
        free(owned);
        if (rc < 0)
            return -1;
        at = off[b] + n;
    }
    return 0;
}

int tide_graph_save(const tide_graph *g, const char *path, const tide_graph_save_options *opts)
{
    if (td_io_check_path("save_graph", path) < 0)
        return -1;
    td_io_ctx c = {"save_graph", path};
    if (!g)
        return td_io_error_code(&c, TIDE_ERR_INVALID_ARGUMENT, "graph is NULL");
    for (int i = 0; opts && opts->metadata && i < 2 * opts->nmetadata; i++)
        if (!opts->metadata[i] || strlen(opts->metadata[i]) >= TD_GRAPH_NAME_MAX * 16)
            return td_io_error_code(&c, TIDE_ERR_INVALID_ARGUMENT, "metadata %s %d is %s", i % 2
                                    ? "value" : "key", i / 2, opts->metadata[i] ? "too long"
                                    : "NULL");
    for (int k = 0; k < 2; k++) {
        const char *const *names = !opts ? NULL : k ? opts->output_names : opts->input_names;
        int n = k ? tide_graph_num_outputs(g) : tide_graph_num_inputs(g);
        for (int i = 0; names && i < n; i++)
            if (!names[i] || strlen(names[i]) >= TD_GRAPH_NAME_MAX)
                return td_io_error_code(&c, TIDE_ERR_INVALID_ARGUMENT, "%s name %d is %s",
                                        k ? "output" : "input", i,
                                        names[i] ? "too long (255 bytes at most)" : "NULL");
    }
    td_graph_desc d;
    if (td_graph_describe(g, &d) < 0)
        return -1;
    td_io_buf meta = {0};
    uint64_t *off = td_calloc((size_t)d.nblobs + 1, sizeof *off);
    uint32_t *crc = td_calloc((size_t)d.nblobs + 1, sizeof *crc);
    int rc = off && crc ? 0 : td_io_error(&c, "out of memory");
    uint64_t data_bytes = rc == 0 ? plan_data(&d, off, crc, &rc) : 0;
    if (rc == 0)
        write_meta(&meta, g, &d, opts, off, crc);
    if (rc == 0 && meta.failed)
        rc = td_io_error(&c, "out of memory");
    FILE *f = rc == 0 ? td_io_open_write(&c) : NULL;
    if (f) {
        td_graph_header h = {TD_GRAPH_VERSION, TD_GRAPH_HEADER, meta.len,
                             align_up(TD_GRAPH_HEADER + meta.len), data_bytes,
                             td_gf_crc(meta.data, meta.len)};
        uint8_t head[TD_GRAPH_HEADER], zeros[TD_GRAPH_ALIGN] = {0};
        td_graph_header_write(&h, head);
        size_t pad = (size_t)(h.data_offset - TD_GRAPH_HEADER - meta.len);
        rc = td_io_write(&c, f, head, sizeof head);
        if (rc == 0)
            rc = td_io_write(&c, f, meta.data, meta.len);
        if (rc == 0)
            rc = td_io_write(&c, f, zeros, pad);
        if (rc == 0)
            rc = write_blobs(&c, f, &d, off);
        if (td_io_close_write(&c, f) < 0)
            rc = -1;
    } else {
        rc = -1;
    }
    td_io_buf_free(&meta);
    free(off);
    free(crc);
    td_graph_desc_free(&d);
    return rc;
}
