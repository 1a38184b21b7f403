/* Chunk keys of decimal grid indices, metadata documents (read, written, parsed member by member),
 * requests built from specs, default chunk shapes and codec instances (internal/format_util.h); the
 * per-thread scratch buffers are in lib/scratch.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/dtype_util.h"
#include "internal/util.h"

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

int nds_format_codec_new(const json_object *config, size_t elem_size, const char *doc,
                         const char *what, const nds_codec **codec, void **state) {
    json_object *id = NULL;
    json_object_object_get_ex(config, "id", &id);
    const char *name = json_object_get_string(id);
    const nds_codec *c = nds_codec_find(name);
    if (!c)
        return nds_err(NDS_EUNSUPPORTED, "%s: %s needs codec \"%s\", not registered", doc, what,
                       name ? name : "(none)");
    int rc = c->create(state, config, elem_size);
    if (rc) return nds_err_prefix(rc, "%s: %s", doc, what);
    *codec = c;
    return 0;
}

int nds_codec_decode_exact(const nds_codec *c, void *state, const uint8_t *in, size_t len,
                           uint8_t *out, size_t n) {
    size_t got = 0;
    int rc = nds_codec_decode(c, state, in, len, out, n, &got);
    if (rc) return rc;
    if (got != n)
        return nds_err(NDS_ECORRUPT, "%s: expected %zu bytes after decompression, found %zu",
                       c->name, n, got);
    return 0;
}

int nds_codec_decode_grow(const nds_codec *c, void *state, const uint8_t *in, size_t len,
                          uint64_t bound, nds_buf *out) {
    uint64_t cap = (uint64_t)len * 4 < 65536 ? 65536 : (uint64_t)len * 4;
    if (cap > bound) cap = bound;
    for (;;) {
        if (nds_buf_reserve(out, cap ? (size_t)cap : 1) != 0)
            return nds_err(NDS_ENOMEM, "%s: out of memory for %llu bytes", c->name,
                           (unsigned long long)cap);
        size_t got = 0;
        int rc = nds_codec_decode(c, state, in, len, out->data, (size_t)cap, &got);
        out->len = rc ? 0 : got;
        if (rc != NDS_ECORRUPT || cap >= bound) return rc;
        cap = cap > bound / 4 ? bound : cap * 4;
    }
}

void nds_default_chunks(size_t rank, const uint64_t *shape, size_t itemsize, uint64_t target_bytes,
                        uint64_t *chunks) {
    uint64_t target = target_bytes / itemsize;
    for (size_t d = 0; d < rank; d++) chunks[d] = shape[d] ? shape[d] : 1;
    for (;;) {
        uint64_t n;
        if (nds_product_u64(chunks, rank, &n) && n <= target) return;
        size_t longest = 0;
        for (size_t d = 1; d < rank; d++)
            if (chunks[d] > chunks[longest]) longest = d;
        chunks[longest] = nds_ceil_div(chunks[longest], 2);
    }
}

int nds_doc_members_parse(const json_object *doc_json, const char *doc,
                          const nds_doc_member *members, size_t n, void *state) {
    for (size_t i = 0; i < n; i++) {
        json_object *v;
        if (!json_object_object_get_ex(doc_json, members[i].name, &v)) {
            if (!members[i].required) continue;
            return nds_err(NDS_EFORMAT, "%s: missing member \"%s\"", doc, members[i].name);
        }
        int rc = members[i].parse(v, doc, state);
        if (rc) return rc;
    }
    return 0;
}

bool nds_doc_member_known(const nds_doc_member *members, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(members[i].name, name) == 0) return true;
    return false;
}

/* Copies the spec's "metadata" members into req, each checked by m->known. */
static int request_metadata(json_object *req, const json_object *md, const char *where,
                            const nds_spec_members *m) {
    if (!json_object_is_type(md, json_type_object))
        return nds_err(NDS_EINVAL, "%s: spec for %s: \"metadata\" must be an object", m->who,
                       where);
    json_object_object_foreach((json_object *)md, key, val) {
        if (m->known && !m->known(key, val))
            return nds_err(NDS_EINVAL, "%s: spec for %s: unknown metadata member \"%.40s\"", m->who,
                           where, key);
        json_object_object_add(req, key, json_object_get(val));
    }
    return 0;
}

static int request_build(json_object *req, const json_object *spec, const char *where,
                         const nds_spec_members *m) {
    json_object *v;
    if (json_object_object_get_ex(spec, "metadata", &v)) {
        int rc = request_metadata(req, v, where, m);
        if (rc) return rc;
    }
    if (json_object_object_get_ex(spec, "schema", &v)) {
        if (!json_object_is_type(v, json_type_object))
            return nds_err(NDS_EINVAL, "%s: spec for %s: \"schema\" must be an object", m->who,
                           where);
        json_object_object_foreach(v, key, val) {
            int rc = m->schema(req, key, val, where);
            if (rc) return rc;
        }
    }
    if (json_object_object_get_ex(spec, "dtype", &v)) return m->schema(req, "dtype", v, where);
    return 0;
}

int nds_format_request_from_spec(const json_object *spec, const char *where,
                                 const nds_spec_members *m, json_object **out) {
    *out = json_object_new_object();
    if (!*out) return nds_err(NDS_ENOMEM, "%s: out of memory", m->who);
    if (!spec) return 0;
    int rc = json_object_is_type(spec, json_type_object)
                 ? request_build(*out, spec, where, m)
                 : nds_err(NDS_EINVAL, "%s: spec for %s: expected a json object", m->who, where);
    if (rc) {
        json_object_put(*out);
        *out = NULL;
    }
    return rc;
}
