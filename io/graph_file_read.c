/*
 * graph_file_read.c — tide_graph_load: a graph file (graph_file.h, docs/export.md) back into a
 * compiled graph. The header, the meta section and every blob are checked (sizes against the
 * file's, checksums, counts against the bytes left) before anything trusts them; the data
 * section is mapped, so captured tensors on the CPU are views of the file's pages, not copies
 * (MAP_PRIVATE: a graph that writes into one writes into its own page). The nodes then go to
 * td_graph_build, which checks them and replays them into a capture.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/tide_internal.h"
#include "graph_file.h"

/* The mapped file, unmapped when the last tensor viewing it goes. */
typedef struct mapping {
    void *addr;
    size_t len;
    int refs;
} mapping;

static void mapping_release(void *data, void *ctx)
{
    (void)data;
    mapping *m = ctx;
    if (m && __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        munmap(m->addr, m->len);
        free(m);
    }
}

static int read_header(const td_io_ctx *c, FILE *f, uint64_t size, td_graph_header *h)
{
    uint8_t raw[TD_GRAPH_HEADER];
    if (size < TD_GRAPH_HEADER)
        return td_io_error(c, "%llu bytes: too short for a graph file (its header is %u)",
                           (unsigned long long)size, TD_GRAPH_HEADER);
    if (td_io_read_exact(c, f, raw, sizeof raw, "the header") < 0)
        return -1;
    if (memcmp(raw, TD_GRAPH_MAGIC, 8) != 0)
        return td_io_error(c, "not a tide graph file (it does not start with %s; tide.export "
                              "writes them)", TD_GRAPH_MAGIC);
    h->version = (uint32_t)td_gf_le(raw + 8, 4);
    if (h->version > TD_GRAPH_VERSION)
        return td_io_error_code(c, TIDE_ERR_UNSUPPORTED, "graph file format version %u is "
                                "newer than this tide reads (%u): load it with the tide that "
                                "wrote it or a newer one", h->version, TD_GRAPH_VERSION);
    if (td_gf_le(raw + 56, 4) != td_gf_crc(raw, 56) || h->version == 0 ||
        td_gf_le(raw + 12, 4) != TD_GRAPH_HEADER)
        return td_io_error(c, "the header is damaged (its checksum or version does not hold)");
    h->meta_offset = td_gf_le(raw + 16, 8);
    h->meta_bytes = td_gf_le(raw + 24, 8);
    h->data_offset = td_gf_le(raw + 32, 8);
    h->data_bytes = td_gf_le(raw + 40, 8);
    h->meta_crc = (uint32_t)td_gf_le(raw + 48, 4);
    if (h->meta_offset != TD_GRAPH_HEADER || h->meta_bytes > size - TD_GRAPH_HEADER ||
        h->data_offset < TD_GRAPH_HEADER + h->meta_bytes || h->data_offset % TD_GRAPH_ALIGN ||
        h->data_offset > size || h->data_bytes > size - h->data_offset)
        return td_io_error(c, "the header's sections (meta %llu bytes, data %llu bytes at %llu) "
                              "do not fit the file's %llu bytes: it is truncated or damaged",
                           (unsigned long long)h->meta_bytes, (unsigned long long)h->data_bytes,
                           (unsigned long long)h->data_offset, (unsigned long long)size);
    return 0;
}

/* Whether n items of at least each bytes can follow (counts never outgrow the file). */
static bool count_fits(const td_gf_cursor *m, uint64_t n, size_t each)
{
    return !m->failed && n <= (m->n - m->pos) / each;
}

static int op_by_name(const char *name)
{
    for (int op = 0; op < TIDE_NUM_OPS; op++)
        if (strcmp(tide_op_name((tide_op)op), name) == 0)
            return op;
    return -1;
}

/* One node. -1 with the error set for an op this tide does not have; a damaged field marks the
 * cursor failed (the caller names it). */
static int read_node(const td_io_ctx *c, td_gf_cursor *m, int k, td_graph_node *n)
{
    char op[TD_GRAPH_NAME_MAX];
    n->kind = (int)td_gf_get_u8(m);
    n->dtype = (int)td_gf_get_u8(m);
    n->ndim = (int)td_gf_get_u8(m);
    n->flags = (int)td_gf_get_u8(m);
    n->on_host = td_gf_get_u8(m) != 0;
    td_gf_get_str(m, op, sizeof op);
    n->nin = (int)td_gf_get_u8(m);
    if (n->ndim > TIDE_MAX_DIMS || n->nin > 6)
        m->failed = true;
    for (int j = 0; j < n->nin && !m->failed; j++)
        n->in[j] = (int)td_gf_get_u32(m);
    n->root = (int)td_gf_get_u32(m);
    n->ext = (int)td_gf_get_u32(m);
    for (int d = 0; d < n->ndim && !m->failed; d++)
        n->shape[d] = (int64_t)td_gf_get_u64(m);
    for (int d = 0; d < n->ndim && !m->failed; d++)
        n->strides[d] = (int64_t)td_gf_get_u64(m);
    n->offset = (int64_t)td_gf_get_u64(m);
    n->attrs.nints = (int)td_gf_get_u8(m);
    if (n->attrs.nints > 2 * TIDE_MAX_DIMS)
        m->failed = true;
    for (int i = 0; i < n->attrs.nints && !m->failed; i++)
        n->attrs.ints[i] = (int64_t)td_gf_get_u64(m);
    for (int i = 0; i < 3; i++)
        n->attrs.values[i] = td_gf_get_f64(m);
    n->attrs.keepdim = td_gf_get_u8(m) != 0;
    if (m->failed || n->kind == TD_GN_EXTERN)
        return 0;
    if ((n->op = op_by_name(op)) < 0)
        return td_io_error_code(c, TIDE_ERR_UNSUPPORTED, "node %d runs op '%s', which this tide "
                                "does not have (a newer tide wrote the file?)", k, op);
    return 0;
}

/* The names: into info (its strings malloc'ed), dynamic masks into d. */
static int read_names(td_gf_cursor *m, td_graph_desc *d, tide_graph_info *info)
{
    char s[TD_GRAPH_NAME_MAX];
    uint32_t n = td_gf_get_u32(m);
    if (!count_fits(m, n, 8) || !(info->inputs = td_calloc(n + 1, sizeof *info->inputs)) ||
        !(d->dyn = td_calloc(n + 1, sizeof *d->dyn)))
        return -1;
    d->ninputs = info->ninputs = (int)n;
    for (uint32_t i = 0; i < n && !m->failed; i++) {
        td_gf_get_str(m, s, sizeof s);
        info->inputs[i].name = strdup(s);
        d->dyn[i] = td_gf_get_u32(m);
        for (int k = 0; k < 32 && !m->failed; k++) {
            if (!(d->dyn[i] >> k & 1))
                continue;
            td_gf_get_str(m, s, sizeof s);
            if (k < 8 && s[0])
                info->inputs[i].dim_name[k] = strdup(s);
        }
    }
    n = td_gf_get_u32(m);
    if (!count_fits(m, n, 8) || !(info->outputs = td_calloc(n + 1, sizeof *info->outputs)) ||
        !(d->out_node = td_calloc(n + 1, sizeof *d->out_node)))
        return -1;
    d->noutputs = info->noutputs = (int)n;
    for (uint32_t i = 0; i < n && !m->failed; i++) {
        td_gf_get_str(m, s, sizeof s);
        info->outputs[i].name = strdup(s);
        d->out_node[i] = (int)td_gf_get_u32(m);
    }
    return 0;
}

/* The blob table, then each extern's blob. */
typedef struct blob_entry {
    int dtype;
    uint64_t offset, bytes;
    uint32_t crc;
} blob_entry;

static int read_blobs(td_gf_cursor *m, td_graph_desc *d, blob_entry **blobs)
{
    uint32_t n = td_gf_get_u32(m);
    if (!count_fits(m, n, 21) || !(*blobs = td_calloc(n + 1, sizeof **blobs)) ||
        !(d->blobs = td_calloc(n + 1, sizeof *d->blobs)))
        return -1;
    d->nblobs = (int)n;
    for (uint32_t b = 0; b < n; b++) {
        (*blobs)[b].dtype = (int)td_gf_get_u8(m);
        (*blobs)[b].offset = td_gf_get_u64(m);
        (*blobs)[b].bytes = td_gf_get_u64(m);
        (*blobs)[b].crc = td_gf_get_u32(m);
    }
    n = td_gf_get_u32(m);
    if (!count_fits(m, n, 4) || !(d->ext_blob = td_calloc(n + 1, sizeof *d->ext_blob)))
        return -1;
    d->nexterns = (int)n;
    for (uint32_t e = 0; e < n; e++) { /* stored as blob + 1, 0 for an input */
        uint32_t v = td_gf_get_u32(m);
        d->ext_blob[e] = v <= (uint32_t)d->nblobs ? (int)v - 1 : -2;
    }
    return 0;
}

/* The metadata pairs into info. */
static int read_metadata(td_gf_cursor *m, tide_graph_info *info)
{
    static char s[TD_GRAPH_NAME_MAX * 16];
    uint32_t n = td_gf_get_u32(m);
    if (!count_fits(m, n, 8) || !(info->meta_keys = td_calloc(n + 1, sizeof(char *))) ||
        !(info->meta_values = td_calloc(n + 1, sizeof(char *))))
        return -1;
    info->nmeta = (int)n;
    for (uint32_t i = 0; i < n && !m->failed; i++) {
        td_gf_get_str(m, s, sizeof s);
        info->meta_keys[i] = strdup(s);
        td_gf_get_str(m, s, sizeof s);
        info->meta_values[i] = strdup(s);
    }
    return 0;
}

/* The meta section into d, info and the blob table. 0, or -1 with the error set. */
static int read_meta(const td_io_ctx *c, td_gf_cursor *m, td_graph_desc *d, char *device,
                     tide_graph_info *info, blob_entry **blobs)
{
    td_gf_get_str(m, device, TD_GRAPH_NAME_MAX);
    if (read_metadata(m, info) < 0 || read_names(m, d, info) < 0 || read_blobs(m, d, blobs) < 0)
        return m->failed ? td_io_error(c, "the meta section is damaged (its counts run past "
                                          "it)")
                         : td_io_error(c, "out of memory");
    uint32_t n = td_gf_get_u32(m);
    if (!count_fits(m, n, 60))
        return td_io_error(c, "the meta section is damaged (%u nodes do not fit it)", n);
    if (!(d->nodes = td_calloc(n + 1, sizeof *d->nodes)))
        return td_io_error(c, "out of memory");
    d->nnodes = (int)n;
    for (uint32_t k = 0; k < n && !m->failed; k++)
        if (read_node(c, m, (int)k, &d->nodes[k]) < 0)
            return -1;
    if (m->failed || m->pos != m->n)
        return td_io_error(c, "the meta section is damaged (a field runs past it, or bytes "
                              "follow its last node)");
    return 0;
}

/* Each blob as a CPU tensor over the mapped data section, after its checks. */
static int map_blobs(const td_io_ctx *c, FILE *f, uint64_t size, const td_graph_header *h,
                     const blob_entry *blobs, td_graph_desc *d, mapping **map)
{
    if (d->nblobs == 0)
        return 0;
    mapping *mp = td_calloc(1, sizeof *mp);
    if (!mp)
        return td_io_error(c, "out of memory");
    void *addr = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(f), 0);
    if (addr == MAP_FAILED) {
        free(mp);
        return td_io_error(c, "cannot map the file");
    }
    *mp = (mapping){addr, (size_t)size, 1};
    *map = mp;
    for (int b = 0; b < d->nblobs; b++) {
        const blob_entry *e = &blobs[b];
        size_t es = e->dtype < TIDE_NUM_DTYPES ? tide_dtype_size((tide_dtype)e->dtype) : 0;
        if (!es || e->offset % TD_GRAPH_ALIGN || e->offset > h->data_bytes ||
            e->bytes > h->data_bytes - e->offset || e->bytes % es)
            return td_io_error(c, "blob %d (a weight) is damaged: %llu bytes at %llu of a %llu "
                                  "byte data section", b, (unsigned long long)e->bytes,
                               (unsigned long long)e->offset, (unsigned long long)h->data_bytes);
        uint8_t *p = (uint8_t *)addr + h->data_offset + e->offset;
        if (td_gf_crc(p, (size_t)e->bytes) != e->crc)
            return td_io_error(c, "blob %d (a weight, %llu bytes) is damaged: its checksum does "
                                  "not hold", b, (unsigned long long)e->bytes);
        int64_t numel = (int64_t)(e->bytes / es);
        __atomic_add_fetch(&(*map)->refs, 1, __ATOMIC_ACQ_REL);
        d->blobs[b] = tide_wrap(p, (size_t)e->bytes, 1, &numel, NULL, (tide_dtype)e->dtype,
                                mapping_release, *map);
        if (!d->blobs[b]) {
            __atomic_sub_fetch(&(*map)->refs, 1, __ATOMIC_ACQ_REL);
            return -1;
        }
    }
    return 0;
}

/* The declared types: each input's and output's node, -1 for a dynamic dim. */
static void declare_types(const td_graph_desc *d, tide_graph_info *info)
{
    for (int k = 0; k < 2; k++) {
        int n = k ? d->noutputs : d->ninputs;
        for (int i = 0; i < n; i++) {
            tide_graph_io *io = k ? &info->outputs[i] : &info->inputs[i];
            const td_graph_node *nd = &d->nodes[k ? d->out_node[i] : i];
            io->dtype = (tide_dtype)nd->dtype;
            io->ndim = nd->ndim;
            for (int j = 0; j < nd->ndim && j < 8; j++)
                io->shape[j] = !k && (d->dyn[i] >> j & 1) ? -1 : nd->shape[j];
        }
    }
}

/* Reads and builds. The graph, or NULL with the error set. */
static tide_graph *load(const td_io_ctx *c, FILE *f, uint64_t size, const char *device_arg,
                        td_graph_desc *d, tide_graph_info *info, mapping **map)
{
    td_graph_header h = {0};
    if (read_header(c, f, size, &h) < 0)
        return NULL;
    uint8_t *meta = td_malloc((size_t)h.meta_bytes + 1);
    if (!meta) {
        td_io_error(c, "out of memory (a %llu byte meta section)",
                    (unsigned long long)h.meta_bytes);
        return NULL;
    }
    char device[TD_GRAPH_NAME_MAX];
    blob_entry *blobs = NULL;
    td_gf_cursor m = {meta, (size_t)h.meta_bytes, 0, false};
    int rc = td_io_read_exact(c, f, meta, (size_t)h.meta_bytes, "the meta section");
    if (rc == 0 && td_gf_crc(meta, (size_t)h.meta_bytes) != h.meta_crc)
        rc = td_io_error(c, "the meta section is damaged: its checksum does not hold");
    if (rc == 0)
        rc = read_meta(c, &m, d, device, info, &blobs);
    if (rc == 0)
        rc = map_blobs(c, f, size, &h, blobs, d, map);
    free(meta);
    free(blobs);
    if (rc < 0)
        return NULL;
    d->device = device;
    tide_graph *g = td_graph_build(d, device_arg);
    d->device = NULL;
    if (g)
        declare_types(d, info);
    /* the owner of the file's nodes and blobs, for inputs the plan does not take */
    if (g && !(info->owner = td_graph_replanner_new(d, device_arg ? device_arg : device))) {
        tide_graph_free(g);
        g = NULL;
    }
    info->replan = td_graph_replan;
    info->release = td_graph_replanner_free;
    if (!g) {
        char why[512];
        snprintf(why, sizeof why, "%s", tide_last_error());
        td_io_error(c, "%s", strncmp(why, "load_graph: ", 12) ? why : why + 12);
    }
    return g;
}

tide_graph *tide_graph_load(const char *path, const char *device)
{
    if (td_io_check_path("load_graph", path) < 0)
        return NULL;
    td_io_ctx c = {"load_graph", path};
    uint64_t size;
    FILE *f = td_io_open_read(&c, &size);
    if (!f)
        return NULL;
    td_graph_desc d = {0};
    mapping *map = NULL;
    tide_graph_info *info = td_calloc(1, sizeof *info);
    tide_graph *g = info ? load(&c, f, size, device, &d, info, &map) : NULL;
    if (!info)
        td_io_error(&c, "out of memory");
    fclose(f);
    if (g)
        td_graph_set_info(g, info);
    else
        td_graph_info_free(info);
    td_graph_desc_free(&d);
    if (map)
        mapping_release(NULL, map);
    return g;
}
