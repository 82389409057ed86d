/*
 * cpu_tcc_stdio.c — lets libtcc live inside shared objects (libtide.so, the Lua module tide.so).
 *
 * Debian ships libtcc only as a non-PIC static archive. Its code reaches its own globals and three
 * of glibc's (stdout, stderr, environ) with PC-relative relocations, which a shared object allows
 * only against symbols it defines itself. So the build makes a copy of the archive whose
 * references to those three name the hidden variables below instead (objcopy --redefine-sym,
 * CMakeLists.txt), and links it with --exclude-libs so that libtcc's own symbols are local too.
 * The archive's code is not changed, only which symbols it names.
 */
#include <stdio.h>

extern char **environ;

__attribute__((visibility("hidden"))) FILE *td_tcc_stdout;
__attribute__((visibility("hidden"))) FILE *td_tcc_stderr;
__attribute__((visibility("hidden"))) char **td_tcc_environ;

__attribute__((constructor)) static void td_tcc_stdio_init(void)
{
    td_tcc_stdout = stdout;
    td_tcc_stderr = stderr;
    td_tcc_environ = environ;
}
