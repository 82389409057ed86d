/*
 * main.c — the tide program: Lua 5.4 with the tide module built in (require "tide" returns it,
 * and the global `tide` is already set). Options follow the stock lua interpreter:
 *
 *   tide                      the interactive prompt (or runs stdin when it is not a terminal)
 *   tide script.lua args...   runs a script with `arg` (and ...) set
 *   tide -e 'code'            runs code;  -i  stays at the prompt afterwards
 *   tide -l name              require("name") into the global name;  -v  prints the version
 *   tide -h, tide --help      the usage text (exit status 0)
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "repl.h"

int luaopen_tide(lua_State *L);

static const char *progname = "tide";
static lua_State *volatile running_state;

/* ---- running code ------------------------------------------------------------------------ */

static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

/* Ctrl-C while Lua runs: the next Lua instruction raises "interrupted!". A second Ctrl-C before
 * that (a long C kernel) ends the process, as in the lua interpreter. */
static void on_interrupt(int sig)
{
    signal(sig, SIG_DFL);
    lua_sethook(running_state, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE |
                LUA_MASKCOUNT, 1);
}

static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int tide_docall(lua_State *L, int narg, int nres)
{
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    running_state = L;
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_interrupt;
    sigemptyset(&act.sa_mask);
    sigaction(SIGINT, &act, &old);
    int status = lua_pcall(L, narg, nres, base);
    sigaction(SIGINT, &old, NULL);
    lua_sethook(L, NULL, 0, 0);
    lua_remove(L, base);
    return status;
}

int tide_report(lua_State *L, int status)
{
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        fprintf(stderr, "%s: %s\n", progname, msg ? msg : "(error object is not a string)");
        fflush(stderr);
        lua_pop(L, 1);
    }
    return status;
}

/* ---- options ------------------------------------------------------------------------------ */

static bool is_help_option(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

/* The usage text: on stdout for -h/--help, else on stderr after what was wrong. */
static void usage(const char *badoption)
{
    FILE *to = stdout;
    if (!is_help_option(badoption)) {
        to = stderr;
        if (badoption[1] == 'e' || badoption[1] == 'l')
            fprintf(stderr, "%s: '%s' needs an argument\n", progname, badoption);
        else
            fprintf(stderr, "%s: unrecognized option '%s'\n", progname, badoption);
    }
    fprintf(to,
            "usage: %s [options] [script [args]]\n"
            "  -e stat   execute string 'stat'\n"
            "  -i        enter interactive mode after executing 'script'\n"
            "  -l name   require library 'name' into global 'name'\n"
            "  -v        show version information\n"
            "  -h, --help  show this text (at the prompt, help() describes the functions)\n"
            "  --        stop handling options\n"
            "  -         stop handling options and execute stdin\n",
            progname);
    fflush(to);
}

enum { HAS_ERROR = 1, HAS_I = 2, HAS_V = 4, HAS_E = 8 };

/* Scans the options; *script is the index of the script name (0 if none). */
static int collect_args(char **argv, int *script)
{
    int flags = 0;
    int i;
    for (i = 1; argv[i]; i++) {
        *script = i;
        if (argv[i][0] != '-')
            return flags;
        switch (argv[i][1]) {
        case '-':
            if (argv[i][2] != '\0')
                return HAS_ERROR;
            *script = argv[i + 1] ? i + 1 : 0;
            return flags;
        case '\0':
            return flags;
        case 'i':
            if (argv[i][2] != '\0')
                return HAS_ERROR;
            flags |= HAS_I;
            break;
        case 'v':
            if (argv[i][2] != '\0')
                return HAS_ERROR;
            flags |= HAS_V;
            break;
        case 'e':
            flags |= HAS_E; /* fallthrough */
        case 'l':
            if (argv[i][2] == '\0') {
                i++;
                if (!argv[i] || argv[i][0] == '-')
                    return HAS_ERROR;
            }
            break;
        default:
            return HAS_ERROR;
        }
    }
    *script = 0;
    return flags;
}

static void create_arg_table(lua_State *L, char **argv, int argc, int script)
{
    if (script == 0)
        script = argc; /* no script: the arguments are all the interpreter's */
    lua_createtable(L, argc - script, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - (script == argc ? 0 : script));
    }
    lua_setglobal(L, "arg");
}

static int run_chunk(lua_State *L, int status)
{
    if (status == LUA_OK)
        status = tide_docall(L, 0, 0);
    return tide_report(L, status);
}

/* Runs the -e and -l options in order. */
static int run_options(lua_State *L, char **argv, int upto)
{
    for (int i = 1; i < upto; i++) {
        int option = argv[i][1];
        if (argv[i][0] != '-' || (option != 'e' && option != 'l'))
            continue;
        const char *extra = argv[i] + 2;
        if (*extra == '\0')
            extra = argv[++i];
        if (option == 'e') {
            if (run_chunk(L, luaL_loadbuffer(L, extra, strlen(extra), "=(command line)")) != LUA_OK)
                return 0;
        } else {
            lua_getglobal(L, "require");
            lua_pushstring(L, extra);
            int status = tide_docall(L, 1, 1);
            if (status == LUA_OK)
                lua_setglobal(L, extra);
            if (tide_report(L, status) != LUA_OK)
                return 0;
        }
    }
    return 1;
}

static int run_script(lua_State *L, char **argv, int script)
{
    const char *fname = argv[script];
    if (strcmp(fname, "-") == 0 && strcmp(argv[script - 1], "--") != 0)
        fname = NULL; /* stdin */
    int status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        int n = 0;
        for (int i = script + 1; argv[i]; i++, n++) {
            luaL_checkstack(L, 1, "too many arguments to script");
            lua_pushstring(L, argv[i]);
        }
        status = tide_docall(L, n, LUA_MULTRET);
    }
    return tide_report(L, status) == LUA_OK;
}

static void print_version(void)
{
    printf("tide %s (%s)\n", TIDE_VERSION_STRING, LUA_RELEASE);
    fflush(stdout);
}

/* Everything that may raise runs here, under lua_pcall. */
static int protected_main(lua_State *L)
{
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    int script = 0;
    int flags = collect_args(argv, &script);
    luaL_checkversion(L);
    if (flags & HAS_ERROR) {
        const char *option = argv[script] ? argv[script] : "";
        usage(option);
        lua_pushboolean(L, is_help_option(option)); /* -h is no error */
        return 1;
    }
    if (flags & HAS_V)
        print_version();
    luaL_openlibs(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_tide);
    lua_setfield(L, -2, "tide");
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushstring(L, "tide");
    if (tide_report(L, tide_docall(L, 1, 1)) != LUA_OK)
        return 0;
    lua_setglobal(L, "tide");
    create_arg_table(L, argv, argc, script);
    lua_gc(L, LUA_GCGEN, 0, 0);
    if (!run_options(L, argv, script ? script : argc))
        return 0;
    if (script && !run_script(L, argv, script))
        return 0;
    if (flags & HAS_I) {
        tide_repl(L);
    } else if (script == 0 && !(flags & (HAS_E | HAS_V))) {
        if (isatty(0)) {
            tide_repl(L);
        } else if (run_chunk(L, luaL_loadfile(L, NULL)) != LUA_OK) {
            return 0;
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

int main(int argc, char **argv)
{
    if (argv[0] && argv[0][0]) {
        const char *slash = strrchr(argv[0], '/');
        progname = slash ? slash + 1 : argv[0];
    }
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "%s: cannot create the Lua state: not enough memory\n", progname);
        return EXIT_FAILURE;
    }
    lua_pushcfunction(L, protected_main);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int status = lua_pcall(L, 2, 1, 0);
    int ok = status == LUA_OK && lua_toboolean(L, -1);
    tide_report(L, status);
    lua_close(L);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
