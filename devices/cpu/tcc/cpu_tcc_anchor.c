/*
 * cpu_tcc_anchor.c — links libtcc into executables. Debian ships libtcc only as a non-PIC static
 * archive, which cannot go into a shared object (libtide.so, the Lua module tide.so). So
 * cpu_codegen.c refers to libtcc's functions weakly, and this file — linked only into
 * executables (CMakeLists.txt: tide_tcc) — refers to them strongly, pulling libtcc in. Where it
 * is absent the jit interprets its fusion groups (same kernels, same results).
 */
#include <libtcc.h>

void *const td_tcc_anchor[] = {
    (void *)tcc_new,          (void *)tcc_delete,      (void *)tcc_set_error_func,
    (void *)tcc_set_options,  (void *)tcc_set_output_type, (void *)tcc_add_symbol,
    (void *)tcc_compile_string, (void *)tcc_relocate,  (void *)tcc_get_symbol,
};
