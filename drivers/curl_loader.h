/* libcurl, loaded when the first HTTP client is made rather than when the process starts.
 *
 * libcurl pulls in about 30 shared libraries (TLS, Kerberos, LDAP, SSH, IDN, ...): loading and
 * relocating them took about 7 of the 10 ms every ndstore process spent before main, whether or
 * not it touched the network. The network drivers call libcurl through the table below (the
 * curl_* names are macros for its members), filled by nds_curl_load() from libcurl.so.4 with
 * dlopen; nothing links libcurl. Include this header instead of <curl/curl.h>.
 */
#ifndef NDS_CURL_LOADER_H
#define NDS_CURL_LOADER_H

#define CURL_DISABLE_TYPECHECK /* its checks are macros named curl_easy_setopt: ours replace them  \
                                */
#include <curl/curl.h>

typedef struct nds_curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *curl, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *curl, CURLINFO info, ...);
    void (*easy_reset)(CURL *curl);
    void (*easy_cleanup)(CURL *curl);
    const char *(*easy_strerror)(CURLcode code);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_setopt)(CURLM *multi, CURLMoption option, ...);
    CURLMcode (*multi_add_handle)(CURLM *multi, CURL *curl);
    CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *curl);
    CURLMcode (*multi_perform)(CURLM *multi, int *running);
    CURLMcode (*multi_poll)(CURLM *multi, struct curl_waitfd fds[], unsigned n, int timeout_ms,
                            int *ret);
    CURLMcode (*multi_wakeup)(CURLM *multi);
    CURLMsg *(*multi_info_read)(CURLM *multi, int *left);
    CURLMcode (*multi_cleanup)(CURLM *multi);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
    void (*slist_free_all)(struct curl_slist *list);
    time_t (*getdate)(const char *s, const time_t *unused);
} nds_curl_api;

/** The table; valid once nds_curl_load() returned 0. */
extern nds_curl_api nds_curl;

/** Loads libcurl and runs curl_global_init, once per process (thread-safe). 0, or an error
 *  naming what is missing (the s3, gcs and http drivers need libcurl.so.4 installed). */
int nds_curl_load(void);

#ifndef NDS_CURL_LOADER_IMPL
/* curl.h defines these three as macros that check the argument count: replaced by ours. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_global_init nds_curl.global_init
#define curl_easy_init nds_curl.easy_init
#define curl_easy_setopt nds_curl.easy_setopt
#define curl_easy_getinfo nds_curl.easy_getinfo
#define curl_easy_reset nds_curl.easy_reset
#define curl_easy_cleanup nds_curl.easy_cleanup
#define curl_easy_strerror nds_curl.easy_strerror
#define curl_multi_init nds_curl.multi_init
#define curl_multi_setopt nds_curl.multi_setopt
#define curl_multi_add_handle nds_curl.multi_add_handle
#define curl_multi_remove_handle nds_curl.multi_remove_handle
#define curl_multi_perform nds_curl.multi_perform
#define curl_multi_poll nds_curl.multi_poll
#define curl_multi_wakeup nds_curl.multi_wakeup
#define curl_multi_info_read nds_curl.multi_info_read
#define curl_multi_cleanup nds_curl.multi_cleanup
#define curl_slist_append nds_curl.slist_append
#define curl_slist_free_all nds_curl.slist_free_all
#define curl_getdate nds_curl.getdate
#endif

#endif
