/* Contexts: the thread pool, the memory budget and the chunk cache shared by arrays and kvstores.
 * The budget bounds the chunk bytes in flight of every call on the context (lib/pool.c). */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal/budget.h"
#include "internal/context_internal.h"
#include "internal/chunk_cache.h"
#include "internal/error.h"

#define NDS_DEFAULT_BUDGET ((size_t)256 << 20)

struct nds_context {
    nds_pool *pool; /* workers = threads - 1: the calling thread always takes part */
    int threads;
    int local_read_threads; /* default threads of reads from NDS_KV_CAP_LOCAL stores */
    nds_budget *budget;     /* chunk bytes in flight across all calls */
    nds_chunk_cache *cache; /* NULL when caching is off */
};

static nds_context *default_ctx;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static int online_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int nds_context_new(nds_context **out, const nds_context_options *opts) {
    nds_context *c = calloc(1, sizeof *c);
    if (!c) return nds_err(NDS_ENOMEM, "out of memory creating a context");
    /* Default: two threads per core. Chunk tasks mix CPU (codecs) with blocking I/O (fsync,
     * network), so a second thread per core keeps the cores busy while one waits; in-flight chunks
     * stay bounded by 2 x cores, the memory target of docs/performance.md. */
    c->threads = opts && opts->threads > 0 ? opts->threads : 2 * online_cores();
    /* Reads from local stores never wait on I/O (the page cache or memory): one thread per core is
     * as fast, and halves the chunks in flight. An explicit thread count applies to everything. */
    c->local_read_threads = opts && opts->threads > 0 ? opts->threads : online_cores();
    size_t budget = opts && opts->memory_budget ? opts->memory_budget : NDS_DEFAULT_BUDGET;
    int rc = nds_pool_new(&c->pool, c->threads - 1);
    if (!rc) rc = nds_budget_new(&c->budget, budget);
    if (!rc) rc = nds_chunk_cache_new(&c->cache, opts ? opts->cache_bytes : 0);
    if (rc) {
        nds_pool_free(c->pool);
        nds_budget_free(c->budget);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void nds_context_free(nds_context *c) {
    if (!c || c == default_ctx) return;
    nds_pool_free(c->pool);
    nds_budget_free(c->budget);
    nds_chunk_cache_free(c->cache);
    free(c);
}

static void make_default(void) {
    nds_context_options o = NDS_CONTEXT_OPTIONS_INIT;
    const char *env = getenv("NDS_THREADS");
    if (env) o.threads = atoi(env);
    env = getenv("NDS_CACHE_BYTES");
    if (env) o.cache_bytes = (size_t)strtoull(env, NULL, 10);
    env = getenv("NDS_MEMORY_BUDGET");
    if (env) o.memory_budget = (size_t)strtoull(env, NULL, 10);
    if (nds_context_new(&default_ctx, &o) != 0) default_ctx = NULL;
}

nds_context *nds_context_default(void) {
    pthread_once(&default_once, make_default);
    return default_ctx;
}

nds_context *nds_context_resolve(nds_context *c) { return c ? c : nds_context_default(); }
int nds_context_threads(nds_context *c) {
    c = nds_context_resolve(c);
    return c ? c->threads : 1;
}
int nds_context_local_read_threads(nds_context *c) {
    c = nds_context_resolve(c);
    return c ? c->local_read_threads : 1;
}
nds_pool *nds_context_pool(nds_context *c) {
    c = nds_context_resolve(c);
    return c ? c->pool : NULL;
}
size_t nds_context_memory_budget(nds_context *c) {
    c = nds_context_resolve(c);
    return c ? nds_budget_total(c->budget) : NDS_DEFAULT_BUDGET;
}
nds_budget *nds_context_budget(nds_context *c) {
    c = nds_context_resolve(c);
    return c ? c->budget : NULL;
}

nds_chunk_cache *nds_context_cache(nds_context *c) {
    c = nds_context_resolve(c);
    return c ? c->cache : NULL;
}
