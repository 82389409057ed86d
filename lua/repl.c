/*
 * repl.c — the tide prompt: readline line editing with history in ~/.tide_history and Tab
 * completion of globals, table fields and tensor methods (x:<Tab>); an expression's values are
 * printed (tensors in PyTorch's layout, small tables as {2, 3}) unless the line ends with ';';
 * unfinished statements continue on ">>" lines; a line that took over 0.1 s reports its time;
 * Ctrl-C clears the line at the prompt and interrupts running Lua code. The global help(x) is
 * tide.help; Tab sees tide's lazy fields (tide.n<Tab> lists nn; tide.nn.Li<Tab> loads tide.nn).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "repl.h"

#ifdef TIDE_HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

#define HISTORY_MAX 1000

static volatile sig_atomic_t got_sigint;
static void on_prompt_sigint(int sig)
{
    (void)sig;
    got_sigint = 1;
}

typedef enum { READ_LINE, READ_EOF, READ_INTERRUPT } read_status;

static bool use_readline;

/* ---- reading a line ------------------------------------------------------------------------ */

static read_status read_plain(const char *prompt, char **out)
{
    fputs(prompt, stdout);
    fflush(stdout);
    char *line = NULL;
    size_t cap = 0;
    errno = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        if (got_sigint || errno == EINTR) {
            got_sigint = 0;
            clearerr(stdin);
            fputc('\n', stdout);
            return READ_INTERRUPT;
        }
        return READ_EOF;
    }
    if (n > 0 && line[n - 1] == '\n')
        line[n - 1] = '\0';
    *out = line;
    return READ_LINE;
}

#ifdef TIDE_HAVE_READLINE
static char *rl_line;
static bool rl_done_reading;

static void on_line(char *line)
{
    rl_line = line;
    rl_done_reading = true;
    rl_callback_handler_remove();
}

/* readline's callback interface, so that Ctrl-C can clear the line: SIGINT stays blocked
 * except inside pselect(), which it then interrupts, so that no Ctrl-C is missed. */
static read_status read_readline(const char *prompt, char **out)
{
    sigset_t block, unblocked;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &unblocked);
    sigdelset(&unblocked, SIGINT);
    rl_done_reading = false;
    rl_line = NULL;
    rl_callback_handler_install(prompt, on_line);
    read_status status = READ_LINE;
    while (!rl_done_reading) {
        if (got_sigint) {
            got_sigint = 0;
            rl_free_line_state();
            rl_callback_sigcleanup();
            rl_cleanup_after_signal();
            rl_callback_handler_remove();
            fputc('\n', rl_outstream);
            fflush(rl_outstream);
            status = READ_INTERRUPT;
            break;
        }
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(fileno(rl_instream), &fds);
        int r = pselect(fileno(rl_instream) + 1, &fds, NULL, NULL, NULL, &unblocked);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rl_callback_handler_remove();
            status = READ_EOF;
            break;
        }
        rl_callback_read_char();
    }
    sigprocmask(SIG_UNBLOCK, &block, NULL);
    if (status == READ_LINE && !rl_line)
        status = READ_EOF;
    if (status == READ_LINE)
        *out = rl_line;
    return status;
}
#endif

static read_status read_line(const char *prompt, char **out)
{
#ifdef TIDE_HAVE_READLINE
    if (use_readline)
        return read_readline(prompt, out);
#endif
    return read_plain(prompt, out);
}

/* ---- history ------------------------------------------------------------------------------- */

#ifdef TIDE_HAVE_READLINE
static char history_path[4096];

static void history_open(void)
{
    const char *home = getenv("HOME");
    if (!home || !*home)
        return;
    snprintf(history_path, sizeof history_path, "%s/.tide_history", home);
    using_history();
    stifle_history(HISTORY_MAX);
    if (read_history(history_path) != 0) {
        FILE *f = fopen(history_path, "a"); /* so that append_history has a file */
        if (f)
            fclose(f);
        else
            history_path[0] = '\0';
    }
}

static void history_add(const char *chunk)
{
    if (!*chunk)
        return;
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (last && strcmp(last->line, chunk) == 0)
        return;
    add_history(chunk);
    if (history_path[0])
        append_history(1, history_path);
}

static void history_close(void)
{
    if (history_path[0])
        history_truncate_file(history_path, HISTORY_MAX);
}
#endif

/* ---- completion ------------------------------------------------------------------------------ */

#ifdef TIDE_HAVE_READLINE
static lua_State *complete_state;

typedef struct names {
    char **v;
    size_t n, cap;
    size_t next;
} names;
static names candidates;

static void names_clear(names *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i]);
    free(c->v);
    memset(c, 0, sizeof *c);
}

static void names_add(names *c, const char *prefix, char sep, const char *key)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        char **v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return;
        c->v = v;
        c->cap = cap;
    }
    size_t len = strlen(prefix) + strlen(key) + 2;
    char *s = malloc(len);
    if (!s)
        return;
    if (sep)
        snprintf(s, len, "%s%c%s", prefix, sep, key);
    else
        snprintf(s, len, "%s", key);
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i], s) == 0) {
            free(s);
            return;
        }
    c->v[c->n++] = s;
}

static bool is_identifier(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

/* Adds the string keys of the table at idx that start with partial (functions only when
 * methods is set). */
static void add_keys(lua_State *L, int idx, const char *prefix, char sep, const char *partial,
                     bool methods)
{
    idx = lua_absindex(L, idx);
    size_t plen = strlen(partial);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -2);
            if (strncmp(k, partial, plen) == 0 && is_identifier(k) &&
                (!methods || lua_type(L, -1) == LUA_TFUNCTION) && strncmp(k, "__", 2) != 0)
                names_add(&candidates, prefix, sep, k);
        }
        lua_pop(L, 1);
    }
}

/* True when the value at idx is a tide tensor. */
static bool is_tensor(lua_State *L, int idx)
{
    if (!lua_getmetatable(L, idx))
        return false;
    luaL_getmetatable(L, "tide.tensor");
    bool yes = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return yes;
}

static const char *const tensor_attrs[] = {"shape", "dtype", "device", "ndim", "grad",
                                           "requires_grad", "grad_fn", "is_leaf", "data", NULL};
static const char *const keywords[] = {"and", "break", "do", "else", "elseif", "end", "false",
                                       "for", "function", "goto", "if", "in", "local", "nil",
                                       "not", "or", "repeat", "return", "then", "true", "until",
                                       "while", NULL};

/* The names in __lazy of the metatable of the table at idx (tide's nn, optim, data, help: fields
 * its __index loads on first use) that start with partial. */
static void add_lazy_names(lua_State *L, int idx, const char *prefix, const char *partial)
{
    int top = lua_gettop(L);
    if (lua_getmetatable(L, idx) && lua_getfield(L, -1, "__lazy") == LUA_TTABLE) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_rawgeti(L, -1, i) == LUA_TSTRING &&
                strncmp(lua_tostring(L, -1), partial, strlen(partial)) == 0)
                names_add(&candidates, prefix, '.', lua_tostring(L, -1));
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
}

static bool is_lazy_name(lua_State *L, int idx, const char *key)
{
    int top = lua_gettop(L);
    bool yes = false;
    if (lua_getmetatable(L, idx) && lua_getfield(L, -1, "__lazy") == LUA_TTABLE) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n && !yes; i++) {
            yes = lua_rawgeti(L, -1, i) == LUA_TSTRING && strcmp(lua_tostring(L, -1), key) == 0;
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
    return yes;
}

static int index_field(lua_State *L)
{
    lua_gettable(L, 1);
    return 1;
}

/* Replaces the table on top by its field key: rawget, or for a name in __lazy the loaded
 * module (tide's own code runs, once; a failure reads as nil). */
static void enter_field(lua_State *L, const char *key)
{
    lua_pushstring(L, key);
    lua_rawget(L, -2);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        int top = lua_gettop(L);
        lua_pushnil(L);
        if (is_lazy_name(L, top, key)) {
            lua_pop(L, 1);
            lua_pushcfunction(L, index_field);
            lua_pushvalue(L, top);
            lua_pushstring(L, key);
            if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
                lua_pop(L, 1);
                lua_pushnil(L);
            }
        }
    }
    lua_remove(L, -2);
}

/* Fills candidates for text such as "tide.ze", "x:resh" or "pri". Reads tables with rawget
 * only: completing never runs user code (a lazy tide module is loaded when a name goes
 * through it, as in tide.nn.Li). */
static void build_candidates(lua_State *L, const char *text)
{
    names_clear(&candidates);
    int top = lua_gettop(L);
    const char *sep = strpbrk(text, ".:");
    const char *last = NULL;
    for (const char *p = text; *p; p++)
        if (*p == '.' || *p == ':')
            last = p;
    if (!sep) {
        lua_pushglobaltable(L);
        add_keys(L, -1, "", 0, text, false);
        for (const char *const *k = keywords; *k; k++)
            if (strncmp(*k, text, strlen(text)) == 0)
                names_add(&candidates, "", 0, *k);
        lua_settop(L, top);
        return;
    }
    size_t plen = (size_t)(last - text);
    char *prefix = malloc(plen + 1);
    if (!prefix)
        return;
    memcpy(prefix, text, plen);
    prefix[plen] = '\0';
    /* walk prefix's dotted names from the globals */
    lua_pushglobaltable(L);
    bool ok = true;
    char *save = NULL;
    char *path = strdup(prefix);
    for (char *part = path ? strtok_r(path, ".", &save) : NULL; part && ok;
         part = strtok_r(NULL, ".", &save)) {
        if (!is_identifier(part) || lua_type(L, -1) != LUA_TTABLE) {
            ok = false;
            break;
        }
        enter_field(L, part);
    }
    free(path);
    if (ok && strchr(prefix, ':') == NULL) {
        const char *partial = last + 1;
        if (*last == ':') {
            if (is_tensor(L, -1)) {
                lua_getfield(L, LUA_REGISTRYINDEX, "tide.methods");
                add_keys(L, -1, prefix, ':', partial, true);
            } else if (lua_type(L, -1) == LUA_TSTRING) {
                lua_pushglobaltable(L);
                lua_getfield(L, -1, "string");
                if (lua_type(L, -1) == LUA_TTABLE)
                    add_keys(L, -1, prefix, ':', partial, true);
            } else if (lua_type(L, -1) == LUA_TTABLE) {
                add_keys(L, -1, prefix, ':', partial, true);
                if (lua_getmetatable(L, -1) && lua_getfield(L, -1, "__index") == LUA_TTABLE)
                    add_keys(L, -1, prefix, ':', partial, true);
            }
        } else if (is_tensor(L, -1)) {
            for (const char *const *a = tensor_attrs; *a; a++)
                if (strncmp(*a, partial, strlen(partial)) == 0)
                    names_add(&candidates, prefix, '.', *a);
        } else if (lua_type(L, -1) == LUA_TTABLE) {
            add_keys(L, -1, prefix, '.', partial, false);
            add_lazy_names(L, -1, prefix, partial);
            if (lua_getmetatable(L, -1) && lua_getfield(L, -1, "__index") == LUA_TTABLE)
                add_keys(L, -1, prefix, '.', partial, false);
        }
    }
    free(prefix);
    lua_settop(L, top);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *complete_next(const char *text, int state)
{
    if (state == 0) {
        build_candidates(complete_state, text);
        qsort(candidates.v, candidates.n, sizeof *candidates.v, compare_names);
        candidates.next = 0;
    }
    if (candidates.next < candidates.n)
        return strdup(candidates.v[candidates.next++]);
    return NULL;
}

static char **complete(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1; /* never fall back to file names */
    rl_completion_append_character = '\0';
    return rl_completion_matches(text, complete_next);
}
#endif

/* ---- reading a chunk ------------------------------------------------------------------------- */

/* True when the syntax error on top of the stack says the chunk only needs more lines. */
static bool incomplete(lua_State *L, int status)
{
    if (status != LUA_ERRSYNTAX)
        return false;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    static const char eof[] = "<eof>";
    return len >= sizeof eof - 1 && strcmp(msg + len - (sizeof eof - 1), eof) == 0;
}

/* Compiles "return <chunk>" if that is valid (an expression), else chunk itself. */
static int compile(lua_State *L, const char *chunk, bool *expression)
{
    lua_pushfstring(L, "return %s", chunk);
    int status = luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1), "=stdin");
    lua_remove(L, -2);
    if (status == LUA_OK) {
        *expression = true;
        return status;
    }
    lua_pop(L, 1);
    *expression = false;
    return luaL_loadbuffer(L, chunk, strlen(chunk), "=stdin");
}

static bool ends_with_semicolon(const char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    return n > 0 && s[n - 1] == ';';
}

/* Reads lines until they form a chunk (or an error that more lines cannot fix). Leaves the
 * compiled function (or the error message) on the stack; returns its status, or -1 at the end
 * of input and -2 when Ctrl-C dropped the input. */
static int read_chunk(lua_State *L, bool *print)
{
    char *line = NULL;
    read_status rs = read_line("> ", &line);
    if (rs == READ_EOF)
        return -1;
    if (rs == READ_INTERRUPT)
        return -2;
    luaL_Buffer b;
    lua_pushstring(L, line);
    free(line);
    int slot = lua_gettop(L);
    bool expression;
    for (;;) {
        const char *chunk = lua_tostring(L, slot);
        int status = compile(L, chunk, &expression);
        if (!incomplete(L, status)) {
#ifdef TIDE_HAVE_READLINE
            if (use_readline)
                history_add(chunk);
#endif
            *print = expression && !ends_with_semicolon(chunk);
            lua_remove(L, slot);
            return status;
        }
        lua_pop(L, 1);
        rs = read_line(">> ", &line);
        if (rs == READ_INTERRUPT) {
            lua_settop(L, slot - 1);
            return -2;
        }
        if (rs == READ_EOF) {
            fputc('\n', stdout);
            compile(L, chunk, &expression); /* reports the unfinished chunk's error */
            lua_remove(L, slot);
            return LUA_ERRSYNTAX;
        }
        luaL_buffinit(L, &b);
        lua_pushvalue(L, slot);
        luaL_addvalue(&b);
        luaL_addchar(&b, '\n');
        luaL_addstring(&b, line);
        free(line);
        luaL_pushresult(&b);
        lua_replace(L, slot);
    }
}

/* ---- printing results ---------------------------------------------------------------------- */

/* A readable form of a value: tables of plain values (numbers, strings, booleans, tensors, such
 * tables up to 3 levels: what x:totable() gives) as {2, 3} or {in_use = 0}, long ones shortened
 * to their first and last entries around "... (N more)"; everything else through tostring
 * (tensors print themselves). */
enum { SHOW_ALL = 24, SHOW_HEAD = 10, SHOW_TAIL = 3, SHOW_KEYS = 24 };

static void push_repr(lua_State *L, int idx, int depth);

/* True when the table at idx prints as {...}: sets its array length and number of string keys. */
static bool plain_table(lua_State *L, int idx, int depth, lua_Integer *n_array, lua_Integer *n_keys)
{
    if (depth > 2)
        return false;
    if (luaL_getmetafield(L, idx, "__tostring") != LUA_TNIL) {
        lua_pop(L, 1);
        return false;
    }
    lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
    lua_Integer keys = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int kt = lua_type(L, -2);
        bool array_key = kt == LUA_TNUMBER && lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 &&
                         lua_tointeger(L, -2) <= len;
        bool string_key = kt == LUA_TSTRING && is_identifier(lua_tostring(L, -2));
        keys += string_key;
        bool ok = array_key || string_key;
        int vt = lua_type(L, -1);
        lua_Integer inner_n, inner_k;
        if (vt == LUA_TTABLE)
            ok = ok && plain_table(L, lua_gettop(L), depth + 1, &inner_n, &inner_k);
        ok = ok && vt != LUA_TFUNCTION && vt != LUA_TTHREAD;
        lua_pop(L, 1);
        if (!ok) {
            lua_pop(L, 1);
            return false;
        }
    }
    *n_array = len;
    *n_keys = keys;
    return true;
}

static int compare_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Pushes a new table anchoring the string keys of the table at idx and returns them sorted,
 * in a userdata below it (both owned by the Lua stack, so an error frees them). */
static const char **push_sorted_keys(lua_State *L, int idx, lua_Integer nk)
{
    const char **keys = lua_newuserdatauv(L, (size_t)(nk > 0 ? nk : 1) * sizeof *keys, 0);
    lua_createtable(L, (int)nk, 0);
    int anchor = lua_gettop(L);
    lua_Integer got = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING && got < nk) {
            lua_pushvalue(L, -1);
            lua_rawseti(L, anchor, got + 1);
            keys[got++] = lua_tostring(L, -1);
        }
    }
    qsort(keys, (size_t)got, sizeof keys[0], compare_cstr);
    return keys;
}

/* Pushes the pieces of {a, b, k = v}, concatenated as they grow so that the stack stays short. */
static void push_table_repr(lua_State *L, int idx, int depth, lua_Integer n, lua_Integer nk)
{
    const char **keys = push_sorted_keys(L, idx, nk);
    int anchors = lua_gettop(L) - 1;
    lua_Integer shown_keys = nk > SHOW_KEYS ? SHOW_KEYS : nk;
    bool cut = n > SHOW_ALL;
    int pieces = 1;
    lua_pushliteral(L, "{");
    for (lua_Integer i = 1; i <= n + shown_keys; i++) {
        if (cut && i == SHOW_HEAD + 1) {
            lua_pushfstring(L, ", ... (%I more)", n - SHOW_HEAD - SHOW_TAIL);
            pieces++;
            i = n - SHOW_TAIL + 1;
        }
        if (i > 1) {
            lua_pushliteral(L, ", ");
            pieces++;
        }
        if (i <= n) {
            lua_rawgeti(L, idx, i);
        } else {
            lua_pushfstring(L, "%s = ", keys[i - n - 1]);
            pieces++;
            lua_getfield(L, idx, keys[i - n - 1]);
        }
        push_repr(L, -1, depth + 1);
        lua_remove(L, -2);
        pieces++;
        if (pieces > 30) {
            lua_concat(L, pieces);
            pieces = 1;
        }
    }
    if (nk > shown_keys) {
        lua_pushfstring(L, ", ... (%I more)", nk - shown_keys);
        pieces++;
    }
    lua_pushliteral(L, "}");
    lua_concat(L, pieces + 1);
    lua_replace(L, anchors);
    lua_settop(L, anchors);
}

/* For a table that is a loaded module (package.loaded["tide.nn"] ...), pushes a one-line
 * summary and returns true. */
static bool push_module_summary(lua_State *L, int idx)
{
    int top = lua_gettop(L);
    if (luaL_getmetafield(L, idx, "__tostring") != LUA_TNIL ||
        lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE) != LUA_TTABLE) {
        lua_settop(L, top);
        return false;
    }
    lua_pushnil(L);
    while (lua_next(L, top + 1)) {
        if (lua_rawequal(L, -1, idx) && lua_type(L, -2) == LUA_TSTRING) {
            int fields = 0;
            lua_pushnil(L);
            while (lua_next(L, idx)) {
                fields++;
                lua_pop(L, 1);
            }
            const char *name = lua_tostring(L, -2);
            if (strncmp(name, "tide.", 5) == 0)
                lua_pushfstring(L, "module %s (%d fields): help(%s) lists its functions", name,
                                fields, name);
            else
                lua_pushfstring(L, "module %s (%d fields)", name, fields);
            lua_replace(L, top + 1);
            lua_settop(L, top + 1);
            return true;
        }
        lua_pop(L, 1);
    }
    lua_settop(L, top);
    return false;
}

static void push_repr(lua_State *L, int idx, int depth)
{
    idx = lua_absindex(L, idx);
    luaL_checkstack(L, 40, "printing a value");
    lua_Integer n, nk;
    if (lua_type(L, idx) == LUA_TTABLE && plain_table(L, idx, depth, &n, &nk))
        push_table_repr(L, idx, depth, n, nk);
    else if (lua_type(L, idx) == LUA_TTABLE && depth == 0 && push_module_summary(L, idx))
        return;
    else if (lua_type(L, idx) == LUA_TSTRING && depth > 0)
        lua_pushfstring(L, "\"%s\"", lua_tostring(L, idx));
    else
        luaL_tolstring(L, idx, NULL);
}

/* The stack holds the results; pushes the line (or lines) that show them. Runs protected: a
 * failing __tostring is reported like any error. */
static int print_values(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_checkstack(L, n + 4, "printing values");
    bool multiline = false;
    for (int i = 1; i <= n; i++) {
        push_repr(L, i, 0);
        multiline = multiline || strchr(lua_tostring(L, -1), '\n') != NULL;
        if (i < n)
            lua_pushstring(L, multiline ? "\n" : "\t");
    }
    /* several values share a line, unless one of them (a matrix) takes several lines */
    if (multiline)
        for (int i = n + 2; i < 2 * n; i += 2) {
            lua_pushliteral(L, "\n");
            lua_replace(L, i);
        }
    lua_concat(L, 2 * n - 1);
    return 1;
}

static void print_results(lua_State *L, int base)
{
    int n = lua_gettop(L) - base;
    if (n <= 0)
        return;
    lua_pushcfunction(L, print_values);
    lua_insert(L, base + 1);
    int status = lua_pcall(L, n, 1, 0);
    if (status == LUA_OK) {
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        fwrite(s, 1, len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        lua_pop(L, 1);
    } else {
        tide_report(L, status);
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The prompt's global help(x): tide.help, loaded on the first call so that start-up stays fast. */
static int help_global(lua_State *L)
{
    int n = lua_gettop(L);
    if (lua_getglobal(L, "tide") != LUA_TTABLE || lua_getfield(L, -1, "help") == LUA_TNIL)
        return luaL_error(L, "help: the global tide is not the tide module");
    lua_insert(L, 1);
    lua_settop(L, n + 1);
    lua_call(L, n, 0);
    return 0;
}

void tide_repl(lua_State *L)
{
#ifdef TIDE_HAVE_READLINE
    use_readline = isatty(0) && isatty(1);
    if (use_readline) {
        rl_readline_name = "tide";
        rl_catch_signals = 0;
        complete_state = L;
        rl_attempted_completion_function = complete;
        rl_completer_word_break_characters = " \t\n\"\\'`@$><=;|&{(,+-*/%^~#[])}";
        history_open();
    }
#endif
    lua_getglobal(L, "tide");
    const char *version = lua_type(L, -1) == LUA_TTABLE && lua_getfield(L, -1, "version") ==
                          LUA_TSTRING ? lua_tostring(L, -1) : "?";
    printf("tide %s (%s): the module is in the global `tide`. Tab completes, help() helps, "
           "Ctrl-D exits.\n", version, LUA_RELEASE);
    fflush(stdout);
    lua_settop(L, 0);
    if (lua_getglobal(L, "help") == LUA_TNIL) {
        lua_pushcfunction(L, help_global);
        lua_setglobal(L, "help");
    }
    lua_settop(L, 0);
    /* At the prompt (and between lines) Ctrl-C only sets a flag; tide_docall swaps in its own
     * handler while code runs. No SA_RESTART: a blocked read returns EINTR. */
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_prompt_sigint;
    sigemptyset(&act.sa_mask);
    sigaction(SIGINT, &act, &old);
    got_sigint = 0;
    for (;;) {
        bool print = false;
        int status = read_chunk(L, &print);
        if (status == -1)
            break;
        if (status == -2)
            continue;
        if (status == LUA_OK) {
            int base = lua_gettop(L) - 1;
            double t0 = now();
            status = tide_docall(L, 0, LUA_MULTRET);
            double dt = now() - t0;
            if (status == LUA_OK && print)
                print_results(L, base);
            if (dt > 0.1) {
                printf("(%.2f s)\n", dt);
                fflush(stdout);
            }
        }
        tide_report(L, status);
        lua_settop(L, 0);
    }
    sigaction(SIGINT, &old, NULL);
    fputc('\n', stdout);
    fflush(stdout);
#ifdef TIDE_HAVE_READLINE
    if (use_readline) {
        history_close();
        names_clear(&candidates);
        rl_callback_handler_remove();
        clear_history();
    }
#endif
}
