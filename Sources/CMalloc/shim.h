#ifndef TETHER_CMALLOC_SHIM_H
#define TETHER_CMALLOC_SHIM_H
// glibc's <malloc.h> (not in Swift's Glibc module): mallopt for the arena limit, mallinfo2 for the heap's figures.
#include <errno.h>
#include <malloc.h>
#include <stdio.h>

// 0 when everything the program wrote to standard output reached it, else why not (an errno: a full disk, a
// closed pipe; EIO when an earlier write failed and its reason is gone). stdout is a C global Swift 6 refuses
// to touch from Swift.
static inline int tether_standard_output_error(void) {
    errno = 0;
    if (fflush(stdout) != 0) return errno != 0 ? errno : EIO;
    return ferror(stdout) ? EIO : 0;
}
#endif
