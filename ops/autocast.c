/*
 * autocast.c — the thread's autocast dtype and the one helper that the ops it covers call
 * (autocast.h says which ops and why).
 */
#include <stdarg.h>

#include "autocast.h"

static _Thread_local int autocast_dtype = TIDE_AUTOCAST_OFF;

int tide_set_autocast(int dtype)
{
    if (dtype != TIDE_AUTOCAST_OFF && dtype != TIDE_FLOAT16 && dtype != TIDE_BFLOAT16) {
        const char *name = dtype >= 0 && dtype < TIDE_NUM_DTYPES
                               ? tide_dtype_name((tide_dtype)dtype)
                               : "an unknown dtype";
        return td_error("set_autocast: the dtype must be float16 or bfloat16 (or off), got %s",
                        name);
    }
    autocast_dtype = dtype;
    return 0;
}

int tide_get_autocast(void) { return autocast_dtype; }

/* The dtype t becomes under kind, or t's own when it stays. */
static tide_dtype target(td_autocast_kind kind, tide_dtype dt)
{
    bool half = td_dtype_is_half(dt);
    if (kind == TD_AUTOCAST_LOWER)
        return dt == TIDE_FLOAT32 || half ? (tide_dtype)autocast_dtype : dt;
    return half ? TIDE_FLOAT32 : dt;
}

int td_autocast_args(td_autocast_held *h, td_autocast_kind kind, int n, ...)
{
    bool on = autocast_dtype != TIDE_AUTOCAST_OFF;
    h->narrow_to = -1;
    if (!on && kind == TD_AUTOCAST_LOWER)
        return 0;
    va_list ap;
    va_start(ap, n);
    int rc = 0, result = -1; /* without autocast: the floating arguments' promoted dtype */
    for (int i = 0; i < n && rc == 0; i++) {
        const tide_tensor **arg = va_arg(ap, const tide_tensor **);
        const tide_tensor *t = *arg;
        if (!t)
            continue; /* an optional argument, or a NULL the op itself reports */
        if (!on && tide_dtype_is_floating((tide_dtype)t->dtype))
            result = result < 0 ? t->dtype
                                : (int)tide_promote_types((tide_dtype)result, (tide_dtype)t->dtype);
        tide_dtype to = target(kind, (tide_dtype)t->dtype);
        if (to == (tide_dtype)t->dtype)
            continue;
        tide_tensor *c = h->n < TD_AUTOCAST_MAX_ARGS ? tide_cast(t, to) : NULL;
        if (!c) {
            rc = h->n < TD_AUTOCAST_MAX_ARGS ? -1 : td_error("autocast: too many arguments");
            break;
        }
        h->t[h->n++] = c;
        *arg = c;
    }
    va_end(ap);
    if (!on && td_dtype_is_half(result))
        h->narrow_to = result;
    return rc;
}

void td_autocast_release(td_autocast_held *h)
{
    for (int i = 0; i < h->n; i++)
        tide_release(h->t[i]);
    h->n = 0;
}

tide_tensor *td_autocast_narrow(tide_tensor *result, int dtype)
{
    if (result->dtype == dtype || !tide_dtype_is_floating((tide_dtype)result->dtype))
        return result;
    tide_tensor *narrow = tide_cast(result, (tide_dtype)dtype);
    tide_release(result);
    return narrow;
}
