#ifndef TETHER_CLIBPQ_SHIM_H
#define TETHER_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
