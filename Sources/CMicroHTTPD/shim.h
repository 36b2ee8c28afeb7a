#ifndef TETHER_CMICROHTTPD_SHIM_H
#define TETHER_CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>
#endif
