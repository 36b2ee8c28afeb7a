#ifndef TETHER_CCURL_SHIM_H
#define TETHER_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed wrapper per kind of value. */

typedef size_t (*tether_curl_data_function)(char *data, size_t size, size_t count, void *context);

static inline CURLcode tether_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tether_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tether_curl_set_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tether_curl_set_data_function(CURL *handle, CURLoption option, tether_curl_data_function function) {
    return curl_easy_setopt(handle, option, function);
}

static inline CURLcode tether_curl_get_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode tether_curl_multi_set_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/* A finished transfer's result, or -1 for a message that is not CURLMSG_DONE (`data` is an anonymous union). */
static inline int tether_curl_message_result(const CURLMsg *message) {
    return message->msg == CURLMSG_DONE ? (int)message->data.result : -1;
}

typedef void (*tether_curl_lock_function)(CURL *handle, curl_lock_data data, curl_lock_access access, void *context);
typedef void (*tether_curl_unlock_function)(CURL *handle, curl_lock_data data, void *context);

static inline CURLSHcode tether_curl_share_data(CURLSH *share, curl_lock_data data) {
    return curl_share_setopt(share, CURLSHOPT_SHARE, data);
}

static inline CURLSHcode tether_curl_share_set_locks(CURLSH *share, tether_curl_lock_function lock, tether_curl_unlock_function unlock) {
    CURLSHcode code = curl_share_setopt(share, CURLSHOPT_LOCKFUNC, lock);
    return code != CURLSHE_OK ? code : curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, unlock);
}

#endif
