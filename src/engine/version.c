/* version.c — the library version reported by pt_version(). */
#include "petrel.h"

const char *pt_version(void) {
    return PETREL_VERSION;
}
