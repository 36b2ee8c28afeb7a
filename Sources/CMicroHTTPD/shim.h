#ifndef TETHER_CMICROHTTPD_SHIM_H
#define TETHER_CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* Swift does not import C variadic functions, so every variadic libmicrohttpd
   entry point that TetherHTTP needs is wrapped here with a fixed signature. */

/* The URI log callback's return value becomes the request's initial `*con_cls`,
   which is how TetherHTTP sees the raw request target before it is unescaped. */
typedef void *(*CMicroHTTPD_URILogCallback)(void *cls, const char *uri, struct MHD_Connection *connection);

/* Starts a daemon bound to `address` with exactly the options TetherHTTP uses.
   A `thread_pool_size` below 2 means one internal polling thread; a `per_ip_connection_limit`
   of 0 means none. Connections past either limit are closed as soon as they are accepted. */
static inline struct MHD_Daemon *
CMicroHTTPD_start_daemon(unsigned int flags,
                         const struct sockaddr *address,
                         unsigned int thread_pool_size,
                         unsigned int connection_timeout_seconds,
                         unsigned int connection_limit,
                         unsigned int per_ip_connection_limit,
                         MHD_AccessHandlerCallback handler, void *handler_cls,
                         MHD_RequestCompletedCallback completed, void *completed_cls,
                         CMicroHTTPD_URILogCallback uri_log, void *uri_log_cls,
                         MHD_NotifyConnectionCallback notify_connection, void *notify_connection_cls,
                         MHD_LogCallback logger, void *logger_cls)
{
    /* The logger comes first: libmicrohttpd reports what goes wrong with the options after it through it. */
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_EXTERNAL_LOGGER, logger, logger_cls,
                            MHD_OPTION_SOCK_ADDR, address,
                            MHD_OPTION_THREAD_POOL_SIZE, thread_pool_size < 2 ? 0u : thread_pool_size,
                            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_connection_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, uri_log_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, notify_connection_cls,
                            /* Strict (1): an HTTP/1.1 request without Host is refused (400), and white space in the
                               target closes the connection. (In 0.9.75 white space in a header name is refused only at
                               -1: Tether's own framing check in HTTPServer+MicroHTTPD.swift refuses it.) */
                            MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
                            MHD_OPTION_END);
}

static inline const union MHD_DaemonInfo *
CMicroHTTPD_get_daemon_info(struct MHD_Daemon *daemon, enum MHD_DaemonInfoType type)
{
    return MHD_get_daemon_info(daemon, type);
}

static inline const union MHD_ConnectionInfo *
CMicroHTTPD_get_connection_info(struct MHD_Connection *connection, enum MHD_ConnectionInfoType type)
{
    return MHD_get_connection_info(connection, type);
}

#endif
