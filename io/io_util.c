/*
 * io_util.c — the plumbing every format in io/ shares (see io_internal.h): messages that name
 * the function and the file, exact reads, checked writes, and small byte and string helpers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_internal.h"

static int io_fail(const td_io_ctx *c, int code, const char *fmt, va_list ap)
{
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char path[160];
    td_io_quote(path, sizeof path, c->path, strlen(c->path));
    return td_error_code(code, "%s: %s: %s", c->op, path, msg);
}

int td_io_error(const td_io_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    io_fail(c, TIDE_ERR_IO, fmt, ap);
    va_end(ap);
    return -1;
}

int td_io_error_code(const td_io_ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    io_fail(c, code, fmt, ap);
    va_end(ap);
    return -1;
}

int td_io_check_path(const char *op, const char *path)
{
    if (!path)
        return td_error("%s: path is NULL", op);
    if (!path[0])
        return td_error("%s: path is empty", op);
    return 0;
}

/* What a path that is not a regular file is, for the message. */
static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a named pipe (FIFO)";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    return "neither a file nor a directory";
}

/* A stdio stream on fd, opened with O_NONBLOCK only so that the open itself could not wait on
 * a FIFO: the stream reads and writes as blocking ones do. fd is closed on failure; fdopen
 * allocates, so the fault hook may fail it. */
static FILE *stream_of(const td_io_ctx *c, int fd, const char *mode)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        td_io_error(c, "cannot open: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    FILE *f = NULL;
    if (td_alloc_fails())
        errno = ENOMEM;
    else
        f = fdopen(fd, mode);
    if (!f) {
        td_io_error_code(c, errno == ENOMEM ? TIDE_ERR_OUT_OF_MEMORY : TIDE_ERR_IO,
                         "cannot open: %s", strerror(errno));
        close(fd);
    }
    return f;
}

FILE *td_io_open_read(const td_io_ctx *c, uint64_t *size)
{
    /* O_NONBLOCK: a FIFO's open would otherwise wait for a writer, forever, before the check
     * below could refuse it; this way it returns at once (a socket's open fails: ENXIO). */
    int fd = open(c->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        int err = errno;
        if (stat(c->path, &st) == 0 && !S_ISREG(st.st_mode))
            td_io_error(c, "not a regular file: it is %s", file_kind(st.st_mode));
        else
            td_io_error(c, "cannot open: %s", strerror(err));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        td_io_error(c, "cannot stat: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    /* The size bounds every allocation a reader makes, so it has to be a real one. */
    if (!S_ISREG(st.st_mode)) {
        td_io_error(c, "not a regular file: it is %s", file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    FILE *f = stream_of(c, fd, "rb");
    if (f)
        *size = (uint64_t)st.st_size;
    return f;
}

FILE *td_io_open_write(const td_io_ctx *c)
{
    /* O_NONBLOCK: a FIFO with no reader fails at once (ENXIO) instead of waiting for one
     * forever; one with a reader (a pipe to another program) is written as a stream. */
    int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
    if (fd < 0) {
        if (errno == ENXIO)
            td_io_error(c, "cannot open for writing: it is a named pipe (FIFO) with no reader");
        else
            td_io_error(c, "cannot open for writing: %s", strerror(errno));
        return NULL;
    }
    return stream_of(c, fd, "wb");
}

int td_io_read_exact(const td_io_ctx *c, FILE *f, void *dst, size_t n, const char *what)
{
    size_t got = n ? fread(dst, 1, n, f) : 0;
    if (got == n)
        return 0;
    if (ferror(f))
        return td_io_error(c, "read failed in %s: %s", what, strerror(errno));
    /* The size was checked before reading, so this is a file that shrank meanwhile. */
    return td_io_error(c, "file ends inside %s (%zu of %zu bytes read)", what, got, n);
}

int td_io_write(const td_io_ctx *c, FILE *f, const void *src, size_t n)
{
    if (n && fwrite(src, 1, n, f) != n)
        return td_io_error(c, "write failed: %s", strerror(errno));
    return 0;
}

int td_io_close_write(const td_io_ctx *c, FILE *f)
{
    int err = fflush(f) != 0 || ferror(f) ? errno : 0;
    if (fclose(f) != 0 && !err)
        err = errno ? errno : EIO;
    if (err)
        return td_io_error(c, "write failed: %s", strerror(err));
    return 0;
}

int td_io_write_tensor(const td_io_ctx *c, FILE *f, const tide_tensor *t)
{
    size_t nbytes = (size_t)tide_numel(t) * tide_dtype_size(tide_get_dtype(t));
    if (!nbytes)
        return 0;
    if (tide_is_contiguous(t) && tide_data_ptr(t))
        return td_io_write(c, f, tide_data_ptr(t), nbytes);
    /* A strided view or a tensor on another device: one contiguous host copy. */
    tide_tensor *tc = tide_contiguous(t);
    if (!tc)
        return td_io_error(c, "%s", tide_last_error());
    int rc;
    if (tide_data_ptr(tc)) {
        rc = td_io_write(c, f, tide_data_ptr(tc), nbytes);
    } else {
        void *tmp = td_malloc(nbytes);
        if (!tmp)
            rc = td_io_error(c, "out of memory copying %zu bytes of a tensor", nbytes);
        else if (tide_to_buffer(tc, tmp, nbytes) < 0)
            rc = td_io_error(c, "%s", tide_last_error());
        else
            rc = td_io_write(c, f, tmp, nbytes);
        free(tmp);
    }
    tide_release(tc);
    return rc;
}

void td_io_normalize_bools(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = p[i] != 0;
}

void td_io_swap_bytes(void *p, size_t n, size_t elem_size)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++, b += elem_size)
        for (size_t lo = 0, hi = elem_size - 1; lo < hi; lo++, hi--) {
            uint8_t t = b[lo];
            b[lo] = b[hi];
            b[hi] = t;
        }
}

/* Well-formed UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates, at most U+10FFFF. */
bool td_io_utf8_valid(const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s, *end = p + n;
    while (p < end) {
        uint8_t c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        int len;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (end - p < len)
            return false;
        for (int i = 1; i < len; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (p[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        p += len;
    }
    return true;
}

const char *td_io_quote(char *buf, size_t size, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = (uint8_t)s[i];
        char piece[8];
        if (ch >= 0x20 && ch < 0x7F && ch != '\\')
            piece[0] = (char)ch, piece[1] = 0;
        else if (ch == '\\')
            strcpy(piece, "\\\\");
        else if (ch >= 0x80)
            piece[0] = (char)ch, piece[1] = 0; /* UTF-8 passes through; the text was validated */
        else
            snprintf(piece, sizeof piece, "\\x%02x", ch);
        size_t pl = strlen(piece);
        if (o + pl + 4 > size) { /* room for "..." and the NUL */
            if (size >= 4)
                memcpy(buf + o, "...", 3), o += 3;
            break;
        }
        memcpy(buf + o, piece, pl);
        o += pl;
    }
    if (size)
        buf[o < size ? o : size - 1] = 0;
    return buf;
}

bool td_io_strides_fit(int ndim, const int64_t *shape)
{
    uint64_t span = 1;
    for (int i = 0; i < ndim; i++) {
        uint64_t s = shape[i] > 1 ? (uint64_t)shape[i] : 1;
        if (span > ((uint64_t)1 << 62) / s)
            return false;
        span *= s;
    }
    return true;
}

const char *td_io_shape_str(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t o = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < size)
        snprintf(buf + o, size - o, "]");
    return buf;
}

static bool buf_reserve(td_io_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = td_realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void td_io_buf_add(td_io_buf *b, const void *src, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    b->data[b->len] = 0;
}

void td_io_buf_str(td_io_buf *b, const char *s) { td_io_buf_add(b, s, strlen(s)); }

void td_io_buf_printf(td_io_buf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) { /* only short numbers go through here */
        b->failed = true;
        return;
    }
    td_io_buf_add(b, tmp, (size_t)n);
}

void td_io_buf_free(td_io_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
