/* json.c — the strict pull reader and the string writer of json.h. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

int td_json_fail(td_json *j, const char *fmt, ...)
{
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(j->err, sizeof j->err, "%s at byte %zu of the header", msg, j->pos);
    return -1;
}

void td_json_skip_ws(td_json *j)
{
    while (j->pos < j->n) {
        char c = j->s[j->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        j->pos++;
    }
}

const char *td_json_what(td_json *j)
{
    if (j->pos >= j->n)
        return "the end of the header";
    switch (j->s[j->pos]) {
    case '"': return "a string";
    case '{': return "an object";
    case '[': return "an array";
    case 't': case 'f': return "a boolean";
    case 'n': return "null";
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9': return "a number";
    case ',': return "','";
    case ':': return "':'";
    case '}': return "'}'";
    case ']': return "']'";
    default: return "an invalid character";
    }
}

int td_json_expect(td_json *j, char c)
{
    td_json_skip_ws(j);
    if (j->pos < j->n && j->s[j->pos] == c) {
        j->pos++;
        return 0;
    }
    return td_json_fail(j, "expected '%c', found %s", c, td_json_what(j));
}

int td_json_next(td_json *j, char close, int *count)
{
    td_json_skip_ws(j);
    if (j->pos < j->n && j->s[j->pos] == close) {
        j->pos++;
        return 0;
    }
    if (*count > 0) {
        if (j->pos >= j->n || j->s[j->pos] != ',')
            return td_json_fail(j, "expected ',' or '%c', found %s", close, td_json_what(j));
        j->pos++;
        td_json_skip_ws(j);
        if (j->pos < j->n && j->s[j->pos] == close)
            return td_json_fail(j, "trailing comma before '%c'", close);
    }
    if (j->pos >= j->n)
        return td_json_fail(j, "unterminated %s", close == '}' ? "object" : "array");
    (*count)++;
    return 1;
}

static int hex4(td_json *j, size_t at, uint32_t *out)
{
    if (j->n - at < 4)
        return td_json_fail(j, "truncated \\u escape");
    uint32_t v = 0;
    for (size_t i = at; i < at + 4; i++) {
        char c = j->s[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return td_json_fail(j, "invalid hex digit in \\u escape");
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int td_json_string(td_json *j, char **out, size_t *len)
{
    *out = NULL;
    td_json_skip_ws(j);
    if (j->pos >= j->n || j->s[j->pos] != '"')
        return td_json_fail(j, "expected a string, found %s", td_json_what(j));
    size_t start = ++j->pos, end = start;
    /* Find the closing quote first: the decoded text is never longer than the raw text. */
    while (end < j->n && j->s[end] != '"') {
        if ((unsigned char)j->s[end] < 0x20) {
            j->pos = end;
            return td_json_fail(j, "control character 0x%02x inside a string",
                                (unsigned char)j->s[end]);
        }
        end += j->s[end] == '\\' ? 2 : 1;
    }
    if (end >= j->n) {
        j->pos = j->n;
        return td_json_fail(j, "unterminated string");
    }
    char *o = td_malloc(end - start + 1);
    if (!o)
        return td_json_fail(j, "out of memory");
    size_t k = 0;
    while (j->pos < end) {
        char c = j->s[j->pos];
        if (c != '\\') {
            o[k++] = c;
            j->pos++;
            continue;
        }
        char e = j->s[j->pos + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char decoded[] = "\"\\/\b\f\n\r\t";
            o[k++] = decoded[simple - "\"\\/bfnrt"];
            j->pos += 2;
            continue;
        }
        if (e != 'u') {
            free(o);
            unsigned char u = (unsigned char)e;
            if (u >= 0x21 && u < 0x7F)
                return td_json_fail(j, "invalid escape '\\%c' in a string", e);
            return td_json_fail(j, "invalid escape (backslash before byte 0x%02x) in a string", u);
        }
        uint32_t cp;
        if (hex4(j, j->pos + 2, &cp) < 0) {
            free(o);
            return -1;
        }
        size_t used = 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            free(o);
            return td_json_fail(j, "lone low surrogate \\u%04x in a string", (unsigned)cp);
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (j->pos + 12 > end || j->s[j->pos + 6] != '\\' || j->s[j->pos + 7] != 'u' ||
                hex4(j, j->pos + 8, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF) {
                free(o);
                return td_json_fail(j, "high surrogate \\u%04x without its low surrogate",
                                    (unsigned)cp);
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            used = 12;
        }
        if (cp == 0) {
            free(o);
            return td_json_fail(j, "string contains a NUL character (\\u0000)");
        }
        k += put_utf8(o + k, cp);
        j->pos += used;
    }
    j->pos = end + 1;
    o[k] = 0;
    *out = o;
    *len = k;
    return 0;
}

int td_json_uint(td_json *j, uint64_t *value)
{
    td_json_skip_ws(j);
    size_t start = j->pos, p = start;
    const char *s = j->s;
    bool negative = p < j->n && s[p] == '-';
    if (negative)
        p++;
    if (p >= j->n || s[p] < '0' || s[p] > '9')
        return td_json_fail(j, "expected a non-negative integer, found %s", td_json_what(j));
    uint64_t v = 0;
    bool overflow = false;
    size_t digits = p;
    while (p < j->n && s[p] >= '0' && s[p] <= '9') {
        unsigned d = (unsigned)(s[p] - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        v = v * 10 + d;
        p++;
    }
    if (s[digits] == '0' && p - digits > 1)
        return td_json_fail(j, "number with a leading zero");
    bool fraction = false, exponent = false;
    if (p < j->n && s[p] == '.') {
        fraction = true;
        p++;
        if (p >= j->n || s[p] < '0' || s[p] > '9') {
            j->pos = p;
            return td_json_fail(j, "no digits after the decimal point");
        }
        while (p < j->n && s[p] >= '0' && s[p] <= '9')
            p++;
    }
    if (p < j->n && (s[p] == 'e' || s[p] == 'E')) {
        exponent = true;
        p++;
        if (p < j->n && (s[p] == '+' || s[p] == '-'))
            p++;
        if (p >= j->n || s[p] < '0' || s[p] > '9') {
            j->pos = p;
            return td_json_fail(j, "no digits in the exponent");
        }
        while (p < j->n && s[p] >= '0' && s[p] <= '9')
            p++;
    }
    int shown = (int)(p - start < 40 ? p - start : 40);
    if (negative)
        return td_json_fail(j, "negative number %.*s where a size or offset belongs", shown,
                            s + start);
    if (fraction || exponent)
        return td_json_fail(j, "%.*s is not an integer", shown, s + start);
    if (overflow)
        return td_json_fail(j, "integer %.*s is too large", shown, s + start);
    j->pos = p;
    *value = v;
    return 0;
}

void td_json_write_string(td_io_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    td_io_buf_add(b, "\"", 1);
    size_t run = 0; /* bytes copied as they are, in one append */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[7];
        size_t elen = 0;
        switch (c) {
        case '"': elen = 2, esc[0] = '\\', esc[1] = '"'; break;
        case '\\': elen = 2, esc[0] = '\\', esc[1] = '\\'; break;
        case '\b': elen = 2, esc[0] = '\\', esc[1] = 'b'; break;
        case '\f': elen = 2, esc[0] = '\\', esc[1] = 'f'; break;
        case '\n': elen = 2, esc[0] = '\\', esc[1] = 'n'; break;
        case '\r': elen = 2, esc[0] = '\\', esc[1] = 'r'; break;
        case '\t': elen = 2, esc[0] = '\\', esc[1] = 't'; break;
        default:
            if (c < 0x20) {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                elen = 6;
            }
        }
        if (!elen) {
            run++;
            continue;
        }
        td_io_buf_add(b, s + i - run, run);
        run = 0;
        td_io_buf_add(b, esc, elen);
    }
    td_io_buf_add(b, s + n - run, run);
    td_io_buf_add(b, "\"", 1);
}
