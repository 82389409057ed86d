/*
 * repl.h — what the tide program's two files share: running a chunk with a traceback and Ctrl-C
 * interruption (main.c), and the interactive prompt (repl.c).
 */
#ifndef TIDE_REPL_H
#define TIDE_REPL_H

#include <stdbool.h>

#include <lua.h>

/* Calls the function below narg arguments with a traceback handler; Ctrl-C interrupts it. */
int tide_docall(lua_State *L, int narg, int nres);
/* Prints the error on top of the stack (if status is not LUA_OK) and pops it. */
int tide_report(lua_State *L, int status);
/* The interactive prompt, until end of input. */
void tide_repl(lua_State *L);

#endif
