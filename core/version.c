/* version.c — tide_version(): the version of the library actually linked, which a program built
 * against one tide.h may compare with the TIDE_VERSION_* macros it was compiled with. */
#include "tide.h"

#define TD_STR_(x) #x
#define TD_STR(x) TD_STR_(x)

const char *tide_version(void)
{
    return TD_STR(TIDE_VERSION_MAJOR) "." TD_STR(TIDE_VERSION_MINOR) "." TD_STR(TIDE_VERSION_PATCH);
}
