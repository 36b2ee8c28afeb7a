#ifndef TETHER_CMALLOC_SHIM_H
#define TETHER_CMALLOC_SHIM_H
// glibc's <malloc.h> (not in Swift's Glibc module): mallopt for the arena limit, mallinfo2 for the heap's figures.
#include <malloc.h>
#endif
