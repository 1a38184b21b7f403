/* libcurl loaded on first use (curl_loader.h says why). */
#define NDS_CURL_LOADER_IMPL
#include "curl_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "internal/error.h"

nds_curl_api nds_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_error; /* what failed, for the message; NULL when loaded */
static CURLcode global_rc;

/* One symbol into its slot; false (with load_error set) when libcurl lacks it. */
static bool bind_symbol(void *lib, const char *name, void **slot) {
    *slot = dlsym(lib, name);
    if (!*slot) load_error = name;
    return *slot != NULL;
}

#define BIND(member, symbol) ok = ok && bind_symbol(lib, symbol, (void **)&nds_curl.member)

static void load(void) {
    /* Never unloaded: curl keeps process-wide state (TLS, DNS caches) until exit. */
    void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        load_error = dlerror();
        return;
    }
    bool ok = true;
    BIND(global_init, "curl_global_init");
    BIND(easy_init, "curl_easy_init");
    BIND(easy_setopt, "curl_easy_setopt");
    BIND(easy_getinfo, "curl_easy_getinfo");
    BIND(easy_reset, "curl_easy_reset");
    BIND(easy_cleanup, "curl_easy_cleanup");
    BIND(easy_strerror, "curl_easy_strerror");
    BIND(multi_init, "curl_multi_init");
    BIND(multi_setopt, "curl_multi_setopt");
    BIND(multi_add_handle, "curl_multi_add_handle");
    BIND(multi_remove_handle, "curl_multi_remove_handle");
    BIND(multi_perform, "curl_multi_perform");
    BIND(multi_poll, "curl_multi_poll");
    BIND(multi_wakeup, "curl_multi_wakeup");
    BIND(multi_info_read, "curl_multi_info_read");
    BIND(multi_cleanup, "curl_multi_cleanup");
    BIND(slist_append, "curl_slist_append");
    BIND(slist_free_all, "curl_slist_free_all");
    BIND(getdate, "curl_getdate");
    if (ok) global_rc = nds_curl.global_init(CURL_GLOBAL_DEFAULT);
}

int nds_curl_load(void) {
    pthread_once(&load_once, load);
    if (load_error)
        return nds_err(NDS_EUNSUPPORTED,
                       "http: cannot load libcurl (libcurl.so.4: %s); the s3, gcs and http "
                       "kvstores need it installed (Debian: libcurl4)",
                       load_error);
    if (global_rc != CURLE_OK)
        return nds_err_cause(NDS_EINTERNAL, NDS_CAUSE_CURL, global_rc,
                             "http: curl_global_init failed");
    return 0;
}
