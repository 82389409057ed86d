/*
 * runtime.c — what an embedding application needs around the library's lifetime:
 * tide_empty_cache (give back cached memory and, through release hooks, compiled code) and
 * tide_shutdown (stop the thread pool and free everything tide holds itself).
 *
 * core/ may not call jit/ or the devices, so those register a release hook (td_on_release)
 * the first time they create something worth releasing; core calls the hooks here.
 */
#include <pthread.h>

#include "tensor.h"

#define MAX_RELEASE_HOOKS 16

static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static td_release_hook hooks[MAX_RELEASE_HOOKS];
static int nhooks;

int td_on_release(td_release_hook fn)
{
    if (!fn)
        return td_error("td_on_release: NULL hook");
    pthread_mutex_lock(&hooks_lock);
    int found = 0;
    for (int i = 0; i < nhooks; i++)
        found |= hooks[i] == fn;
    int ok = found || nhooks < MAX_RELEASE_HOOKS;
    if (!found && ok)
        hooks[nhooks++] = fn;
    pthread_mutex_unlock(&hooks_lock);
    return ok ? 0 : td_error("td_on_release: more than %d hooks", MAX_RELEASE_HOOKS);
}

/* Calls the hooks in reverse order of registration, outside the lock (a hook may free
 * tensors, which goes back to the allocator). */
static void run_hooks(bool shutting_down)
{
    td_release_hook copy[MAX_RELEASE_HOOKS];
    pthread_mutex_lock(&hooks_lock);
    int n = nhooks;
    for (int i = 0; i < n; i++)
        copy[i] = hooks[i];
    pthread_mutex_unlock(&hooks_lock);
    for (int i = n - 1; i >= 0; i--)
        copy[i](shutting_down);
}

void tide_empty_cache(void)
{
    run_hooks(false);
    td_cache_empty();
}

void tide_shutdown(void)
{
    run_hooks(true);
    td_threadpool_shutdown();
    td_cache_empty();
}
