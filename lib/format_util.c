/* Chunk keys of decimal grid indices, and per-thread scratch buffers (internal/format_util.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/util.h"

#define SCRATCH_KEEP ((size_t)64 << 20)

int nds_chunk_key_format(char *buf, size_t cap, const char *prefix, char sep, const uint64_t *cell,
                         size_t rank) {
    int n = snprintf(buf, cap, "%s", rank == 0 && !prefix[0] ? "0" : prefix);
    size_t used = n > 0 ? (size_t)n : 0;
    for (size_t d = 0; d < rank && used < cap; d++) {
        bool lead = d > 0 || prefix[0];
        n = snprintf(buf + used, cap - used, "%s%llu", lead ? (char[]){sep, 0} : "",
                     (unsigned long long)cell[d]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used >= cap) return nds_err(NDS_ERANGE, "chunk key longer than %zu bytes", cap);
    return 0;
}

/* One decimal index without leading zeros (so a key parses only if it is exactly what format
 * writes). */
static const char *parse_index(const char *p, uint64_t *out) {
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return NULL;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if (!nds_mul_u64(v, 10, &v) || !nds_add_u64(v, (uint64_t)(*p - '0'), &v)) return NULL;
    *out = v;
    return p;
}

int nds_chunk_key_parse(const char *key, const char *prefix, char sep, const uint64_t *grid,
                        size_t rank, uint64_t *cell) {
    if (rank == 0) return strcmp(key, prefix[0] ? prefix : "0") == 0;
    size_t plen = strlen(prefix);
    if (strncmp(key, prefix, plen) != 0) return 0;
    const char *p = key + plen;
    for (size_t d = 0; d < rank; d++) {
        if ((d > 0 || plen) && *p++ != sep) return 0;
        uint64_t v;
        if (!(p = parse_index(p, &v)) || v >= grid[d]) return 0;
        cell[d] = v;
    }
    return *p == '\0';
}

int nds_format_read_key(nds_kvstore *kv, const char *key, const char *who, const char *url,
                        nds_read_result *r, bool *found) {
    memset(r, 0, sizeof *r);
    int rc = nds_kvstore_read(kv, key, NULL, r);
    if (rc) return nds_err_prefix(rc, "%s: reading %s of %s", who, key, url);
    *found = r->state == NDS_READ_VALUE;
    if (!*found) nds_read_result_dispose(r);
    return 0;
}

int nds_format_write_json(nds_kvstore *kv, const char *key, const json_object *doc,
                          const nds_json_style *style, const nds_generation *if_equal,
                          const char *who, const char *url) {
    nds_buf text = {0};
    int rc = nds_json_print(doc, style, &text);
    if (rc == 0) {
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        if (if_equal) wo.if_equal = *if_equal;
        rc = nds_kvstore_write(kv, key, text.data, text.len, &wo, NULL);
        if (rc && rc != NDS_ECONFLICT)
            rc = nds_err_prefix(rc, "%s: writing %s of %s", who, key, url);
    }
    nds_buf_dispose(&text);
    return rc;
}

/* Scratch buffers live in thread-specific storage whose destructor frees them when a thread exits,
 * so the workers of a freed context give their memory back (a plain _Thread_local would leak it).
 */
typedef struct scratch_set {
    nds_buf slot[NDS_SCRATCH_SLOTS];
} scratch_set;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    scratch_set *s = p;
    for (int i = 0; i < NDS_SCRATCH_SLOTS; i++) nds_buf_dispose(&s->slot[i]);
    free(s);
}

static void scratch_key_create(void) { pthread_key_create(&scratch_key, scratch_free); }

static scratch_set *scratch_get(void) {
    pthread_once(&scratch_once, scratch_key_create);
    scratch_set *s = pthread_getspecific(scratch_key);
    if (!s && (s = calloc(1, sizeof *s)) != NULL && pthread_setspecific(scratch_key, s) != 0) {
        free(s);
        s = NULL;
    }
    return s;
}

nds_buf *nds_scratch_buf(int slot) {
    scratch_set *s = scratch_get();
    return s ? &s->slot[slot] : NULL;
}

uint8_t *nds_scratch(int slot, size_t n) {
    nds_buf *b = nds_scratch_buf(slot);
    if (!b) {
        nds_err(NDS_ENOMEM, "out of memory");
        return NULL;
    }
    return nds_buf_reserve(b, n) == 0 ? b->data : NULL;
}

void nds_scratch_trim(int slot) {
    nds_buf *b = nds_scratch_buf(slot);
    if (b && b->cap > SCRATCH_KEEP) nds_buf_dispose(b);
}
