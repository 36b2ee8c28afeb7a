#ifndef TETHER_CMALLOC_SHIM_H
#define TETHER_CMALLOC_SHIM_H
// glibc's <malloc.h> (not in Swift's Glibc module): mallopt for the arena limit, mallinfo2 for the heap's figures.
#include <malloc.h>
#include <stdio.h>

// Whether everything the program wrote to standard output reached it (a full disk or a closed pipe fails it):
// stdout is a C global Swift 6 refuses to touch from Swift.
static inline int tether_standard_output_written(void) { return fflush(stdout) == 0 && !ferror(stdout); }
#endif
