/* The versioned store's on-disk codecs (versioned_internal.h; docs/versioned-format.md): object
 * names, the 16-byte envelope around every node, commit, tag, superseded list and data object,
 * stored values with their per-block crc32c tables, and the node / commit / superseded-list / tag
 * encoders and decoders.
 *
 * Every decoder treats its input as hostile: each length and count is checked against the bytes
 * present before anything is allocated from it, and every refusal is NDS_ECORRUPT with a message
 * that starts with the caller's `where` ("index object index/ab.. at 4096: ...") and says what is
 * wrong. Encoders refuse (NDS_EINVAL) what the decoders would refuse, so a writer cannot store an
 * object its readers reject.
 *
 * Omits: any I/O (the driver reads and writes objects), the tree's algorithms (versioned_tree.c),
 * and caching. Threading: pure functions, reentrant. Ownership: decoded nodes, entries, commits and
 * superseded lists are owned by the caller (vs_node_free, vs_entry_dispose, vs_commit_dispose,
 * free).
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <json-c/json.h>

#include "ndstore/sys/kv_driver.h"
#include "versioned_internal.h"
#include "internal/crc32c.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define FORMAT_NAME "ndstore-versioned"
/* Smallest encodings of one item: a leaf with an empty inline value (and, were it allowed, an
 * empty key), an inner item with an empty key. Used to bound hostile counts before allocating. */
#define LEAF_ITEM_MIN (2 + 8 + 1 + 4)
#define INNER_ITEM_MIN (2 + VS_ID_SIZE + 8 + 8 + 4 + 8)
#define SUPERSEDED_ITEM_SIZE (VS_ID_SIZE + 1 + 8)
/* JSON integers are read as int64: larger offsets and counts cannot occur in a valid store. */
#define JSON_U64_MAX ((uint64_t)INT64_MAX)

static const char *where_or_default(const char *where) {
    return where && where[0] ? where : "versioned object";
}

/* ---- names ----------------------------------------------------------------------------------- */

/* Bytes 0-5: the writer's wall clock in milliseconds since the epoch, big-endian, so names sort by
 * creation time and gc lists only the names made since its last run (docs/versioned-format.md
 * "Objects"); bytes 6-15: random. Readers treat the name as opaque. */
int vs_id_random(vs_id *id) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    for (int i = 0; i < VS_ID_TIME_BYTES; i++)
        id->b[i] = (uint8_t)(ms >> (8 * (VS_ID_TIME_BYTES - 1 - i)));
    size_t got = VS_ID_TIME_BYTES;
    while (got < sizeof id->b) {
        ssize_t n = getrandom(id->b + got, sizeof id->b - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return nds_err_cause(NDS_EIO, NDS_CAUSE_ERRNO, errno,
                                 "versioned: getrandom for an object name: %s", strerror(errno));
        }
        got += (size_t)n;
    }
    return 0;
}

void vs_id_hex(const vs_id *id, char out[VS_ID_HEX]) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < VS_ID_SIZE; i++) {
        out[2 * i] = digits[id->b[i] >> 4];
        out[2 * i + 1] = digits[id->b[i] & 15];
    }
    out[2 * VS_ID_SIZE] = '\0';
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int vs_id_parse(const char *hex, vs_id *id) {
    if (!hex) return NDS_EINVAL;
    for (size_t i = 0; i < VS_ID_SIZE; i++) {
        /* hex[2i] is checked before hex[2i+1] is read, so a short string stops at its NUL. */
        int hi = hex_digit(hex[2 * i]);
        if (hi < 0) return NDS_EINVAL;
        int lo = hex_digit(hex[2 * i + 1]);
        if (lo < 0) return NDS_EINVAL;
        id->b[i] = (uint8_t)(hi << 4 | lo);
    }
    return hex[2 * VS_ID_SIZE] == '\0' ? 0 : NDS_EINVAL;
}

void vs_commit_key(uint64_t version, char out[VS_OBJECT_KEY_MAX]) {
    snprintf(out, VS_OBJECT_KEY_MAX, VS_COMMIT_PREFIX "%020" PRIu64, version);
}

int vs_commit_key_parse(const char *key, uint64_t *version) {
    size_t plen = strlen(VS_COMMIT_PREFIX);
    if (!key || strncmp(key, VS_COMMIT_PREFIX, plen) != 0) return -1;
    const char *d = key + plen;
    uint64_t v = 0;
    for (size_t i = 0; i < 20; i++) {
        if (d[i] < '0' || d[i] > '9') return -1;
        unsigned digit = (unsigned)(d[i] - '0');
        if (v > (UINT64_MAX - digit) / 10) return -1; /* 20 digits can exceed 2^64 - 1 */
        v = v * 10 + digit;
    }
    if (d[20] != '\0') return -1;
    *version = v;
    return 0;
}

void vs_object_key(const char *prefix, const vs_id *id, char out[VS_OBJECT_KEY_MAX]) {
    char hex[VS_ID_HEX];
    vs_id_hex(id, hex);
    snprintf(out, VS_OBJECT_KEY_MAX, "%s%s", prefix, hex);
}

/* ---- envelopes ------------------------------------------------------------------------------- */

static const char *kind_name(int kind) {
    switch (kind) {
    case VS_KIND_COMMIT: return "a commit";
    case VS_KIND_NODE: return "a node";
    case VS_KIND_SUPERSEDED: return "a superseded list";
    case VS_KIND_TAG: return "a tag";
    case VS_KIND_DATA: return "a data object";
    case VS_KIND_PREPARED: return "a prepared set";
    default: return "an object";
    }
}

static void write_header(uint8_t *h, vs_kind kind, uint32_t len, uint32_t crc) {
    memcpy(h, VS_MAGIC, 4);
    h[4] = (uint8_t)kind;
    h[5] = VS_FORMAT_VERSION;
    h[6] = h[7] = 0;
    nds_store_le32(h + 8, len);
    nds_store_le32(h + 12, crc);
}

/* Makes room for an envelope of a len-byte payload at the end of out; the payload goes at
 * out->data + out->len + VS_HEADER_SIZE, then envelope_seal. */
static int envelope_reserve(nds_buf *out, vs_kind kind, size_t len) {
    if (len > UINT32_MAX)
        return nds_err(NDS_ELIMIT, "versioned: %s of %zu bytes exceeds the format's 4 GiB",
                       kind_name(kind), len);
    if (out->len > SIZE_MAX - VS_HEADER_SIZE - len ||
        nds_buf_reserve(out, out->len + VS_HEADER_SIZE + len))
        return nds_err(NDS_ENOMEM, "versioned: out of memory encoding %s", kind_name(kind));
    return 0;
}

/* Writes the header of the payload placed after envelope_reserve and appends the envelope. */
static void envelope_seal(nds_buf *out, vs_kind kind, size_t len, uint32_t *crc) {
    uint8_t *h = out->data + out->len;
    uint32_t c = nds_crc32c(h + VS_HEADER_SIZE, len);
    write_header(h, kind, (uint32_t)len, c);
    out->len += VS_HEADER_SIZE + len;
    if (crc) *crc = c;
}

int vs_envelope_append(nds_buf *out, vs_kind kind, const uint8_t *payload, size_t len,
                       uint32_t *crc) {
    int rc = envelope_reserve(out, kind, len);
    if (rc) return rc;
    if (len) memcpy(out->data + out->len + VS_HEADER_SIZE, payload, len);
    envelope_seal(out, kind, len, crc);
    return 0;
}

/* The kind byte for a message: 'C', or 0x07 when it is not printable. */
static void kind_text(uint8_t k, char out[8]) {
    if (k >= 0x20 && k < 0x7f)
        snprintf(out, 8, "'%c'", k);
    else
        snprintf(out, 8, "0x%02x", k);
}

/* The header checks that need no payload: size, magic, version, kind, reserved, length. */
static int header_check(const uint8_t *p, size_t n, vs_kind want, const char *where) {
    if (n < VS_HEADER_SIZE)
        return nds_err(NDS_ECORRUPT, "%s: truncated: %zu bytes, shorter than the %d-byte header",
                       where, n, VS_HEADER_SIZE);
    if (memcmp(p, VS_MAGIC, 4) != 0)
        return nds_err(NDS_ECORRUPT, "%s: not an ndstore versioned object (bad magic)", where);
    if (p[5] > VS_FORMAT_VERSION)
        return nds_err(NDS_ECORRUPT, "%s: format version %u is newer than this ndstore reads (%d)",
                       where, p[5], VS_FORMAT_VERSION);
    if (p[5] == 0) return nds_err(NDS_ECORRUPT, "%s: format version 0 is invalid", where);
    if (p[4] != (uint8_t)want) {
        char k[8];
        kind_text(p[4], k);
        return nds_err(NDS_ECORRUPT, "%s: kind %s where %s was expected", where, k,
                       kind_name(want));
    }
    if (p[6] || p[7]) return nds_err(NDS_ECORRUPT, "%s: reserved header bytes are not zero", where);
    uint32_t len = nds_load_le32(p + 8);
    if ((uint64_t)len != (uint64_t)(n - VS_HEADER_SIZE))
        return nds_err(NDS_ECORRUPT,
                       "%s: payload length %" PRIu32 " but %zu bytes follow the header", where, len,
                       n - VS_HEADER_SIZE);
    return 0;
}

int vs_envelope_open(const uint8_t *p, size_t n, vs_kind want, const char *where,
                     const uint8_t **payload, size_t *len, uint32_t *crc) {
    where = where_or_default(where);
    int rc = header_check(p, n, want, where);
    if (rc) return rc;
    uint32_t stored = nds_load_le32(p + 12);
    uint32_t computed = nds_crc32c(p + VS_HEADER_SIZE, n - VS_HEADER_SIZE);
    if (stored != computed)
        return nds_err(NDS_ECORRUPT,
                       "%s: payload checksum mismatch (stored 0x%08" PRIx32
                       ", computed 0x%08" PRIx32 ")",
                       where, stored, computed);
    *payload = p + VS_HEADER_SIZE;
    *len = n - VS_HEADER_SIZE;
    if (crc) *crc = computed;
    return 0;
}

int vs_data_begin(nds_buf *out) {
    if (out->len != 0)
        return nds_err(NDS_EINVAL, "versioned: a data object must start in an empty buffer");
    static const uint8_t zero[VS_HEADER_SIZE];
    return nds_buf_append(out, zero, sizeof zero);
}

void vs_data_header(uint8_t header[VS_HEADER_SIZE], uint32_t payload_len, uint32_t payload_crc) {
    write_header(header, VS_KIND_DATA, payload_len, payload_crc);
}

void vs_data_finish(nds_buf *out) {
    assert(out->len >= VS_HEADER_SIZE);
    size_t len = out->len - VS_HEADER_SIZE;
    /* vs_value_append refuses values that would make the payload exceed the u32 length field. */
    assert(len <= UINT32_MAX);
    write_header(out->data, VS_KIND_DATA, (uint32_t)len,
                 nds_crc32c(out->data + VS_HEADER_SIZE, len));
}

/* ---- values ---------------------------------------------------------------------------------- */

static uint64_t block_count(uint64_t len) {
    return len <= VS_BLOCK_SIZE ? 1 : nds_ceil_div(len, VS_BLOCK_SIZE);
}

uint64_t vs_value_table_size(uint64_t len) {
    return len <= VS_BLOCK_SIZE ? 0 : 4 * block_count(len);
}

void vs_value_table(const uint8_t *data, size_t len, uint8_t *table, uint32_t *crc) {
    uint64_t size = vs_value_table_size(len);
    if (size == 0) {
        *crc = nds_crc32c(data, len);
        return;
    }
    for (uint64_t i = 0, nb = block_count(len); i < nb; i++) {
        uint64_t off = i * VS_BLOCK_SIZE;
        nds_store_le32(table + 4 * i,
                       nds_crc32c(data + off, (size_t)nds_min_u64(VS_BLOCK_SIZE, len - off)));
    }
    *crc = nds_crc32c(table, (size_t)size);
}

int vs_value_append(nds_buf *out, const uint8_t *data, size_t len, uint32_t *crc) {
    uint64_t table = vs_value_table_size(len);
    /* A data object's payload length is a u32, so what it holds stays below 4 GiB. */
    if ((uint64_t)out->len + len + table > (uint64_t)UINT32_MAX)
        return nds_err(NDS_ELIMIT,
                       "versioned: a value of %zu bytes does not fit in a data object (at most 4 "
                       "GiB with its block table)",
                       len);
    if (nds_buf_reserve(out, out->len + len + (size_t)table))
        return nds_err(NDS_ENOMEM, "versioned: out of memory storing a value of %zu bytes", len);
    if (len) memcpy(out->data + out->len, data, len);
    out->len += len;
    vs_value_table(data, len, out->data + out->len, crc);
    out->len += (size_t)table;
    return 0;
}

int vs_value_table_verify(const uint8_t *table, uint64_t len, uint32_t crc, const char *where) {
    uint64_t size = vs_value_table_size(len);
    if (size == 0) return 0; /* one block: no table, its crc is the value's own */
    uint32_t computed = nds_crc32c(table, (size_t)size);
    if (computed != crc)
        return nds_err(NDS_ECORRUPT,
                       "%s: block table checksum mismatch (stored 0x%08" PRIx32
                       ", computed 0x%08" PRIx32 ")",
                       where_or_default(where), crc, computed);
    return 0;
}

int vs_value_blocks_verify(const uint8_t *bytes, uint64_t len, uint64_t first, uint64_t count,
                           const uint8_t *table, uint32_t crc, const char *where) {
    where = where_or_default(where);
    uint64_t nb = block_count(len);
    if (first > nb || count > nb - first)
        return nds_err(NDS_EINVAL,
                       "%s: blocks %" PRIu64 "+%" PRIu64 " of a value of %" PRIu64 " blocks", where,
                       first, count, nb);
    if (!table && nb > 1)
        return nds_err(NDS_EINVAL, "%s: a value of %" PRIu64 " blocks needs its table", where, nb);
    const uint8_t *b = bytes;
    for (uint64_t i = first; i < first + count; i++) {
        uint64_t off = i * VS_BLOCK_SIZE, size = nds_min_u64(VS_BLOCK_SIZE, len - off);
        uint32_t computed = nds_crc32c(b, (size_t)size);
        uint32_t stored = table ? nds_load_le32(table + 4 * i) : crc;
        if (computed != stored)
            return nds_err(NDS_ECORRUPT,
                           "%s: block %" PRIu64 " (bytes %" PRIu64 "..%" PRIu64
                           ") checksum mismatch (stored 0x%08" PRIx32 ", computed 0x%08" PRIx32 ")",
                           where, i, off, off + size, stored, computed);
        b += size;
    }
    return 0;
}

int vs_value_verify(const uint8_t *stored, uint64_t len, uint32_t crc, const char *where) {
    const uint8_t *table = len > VS_BLOCK_SIZE ? stored + len : NULL;
    int rc = table ? vs_value_table_verify(table, len, crc, where) : 0;
    return rc ? rc : vs_value_blocks_verify(stored, len, 0, block_count(len), table, crc, where);
}

/* ---- nodes: encoding ------------------------------------------------------------------------- */

size_t vs_node_payload_size(const vs_node *n) {
    size_t size = VS_NODE_PAYLOAD_HEAD;
    for (size_t i = 0; i < n->n; i++)
        size += n->level == 0 ? vs_entry_encoded_size(&n->entries[i])
                              : vs_child_encoded_size(&n->children[i]);
    return size;
}

static void put_ref(uint8_t **w, const vs_ref *r) {
    memcpy(*w, r->object.b, VS_ID_SIZE);
    nds_store_le64(*w + VS_ID_SIZE, r->offset);
    nds_store_le64(*w + VS_ID_SIZE + 8, r->length);
    nds_store_le32(*w + VS_ID_SIZE + 16, r->crc);
    *w += VS_ID_SIZE + 20;
}

static void put_key(uint8_t **w, const char *key, size_t klen) {
    (*w)[0] = (uint8_t)klen;
    (*w)[1] = (uint8_t)(klen >> 8);
    memcpy(*w + 2, key, klen);
    *w += 2 + klen;
}

static void put_entry(uint8_t **w, const vs_entry *e) {
    put_key(w, e->key, strlen(e->key));
    nds_store_le64(*w, e->version);
    (*w)[8] = e->is_inline ? VS_ENTRY_INLINE : 0;
    *w += 9;
    if (e->is_inline) {
        nds_store_le32(*w, (uint32_t)e->len);
        if (e->len) memcpy(*w + 4, e->data, e->len);
        *w += 4 + e->len;
    } else {
        put_ref(w, &e->value);
    }
}

static void put_child(uint8_t **w, const vs_child *c) {
    put_key(w, c->first_key, strlen(c->first_key));
    put_ref(w, &c->ref);
    nds_store_le64(*w, c->keys);
    *w += 8;
}

/* The writer-side twin of the decoder's rules: what would be refused on read is refused here. */
static int node_check_for_encode(const vs_node *n) {
    if (n->level > VS_MAX_LEVEL)
        return nds_err(NDS_EINVAL, "versioned: node level %u exceeds %d", n->level, VS_MAX_LEVEL);
    if (n->n > UINT32_MAX) return nds_err(NDS_EINVAL, "versioned: node of %zu items", n->n);
    if (n->level > 0 && n->n == 0)
        return nds_err(NDS_EINVAL, "versioned: an inner node needs at least one child");
    uint64_t total = 0;
    for (size_t i = 0; i < n->n; i++) {
        const char *key = n->level == 0 ? n->entries[i].key : n->children[i].first_key;
        size_t klen = strlen(key);
        if (klen > VS_KEY_MAX)
            return nds_err(NDS_EINVAL, "versioned: key of %zu bytes exceeds %d", klen, VS_KEY_MAX);
        if (klen == 0 && (n->level == 0 || i > 0))
            return nds_err(NDS_EINVAL, "versioned: empty key in node item %zu", i);
        if (i > 0) {
            const char *prev = n->level == 0 ? n->entries[i - 1].key : n->children[i - 1].first_key;
            if (strcmp(prev, key) >= 0)
                return nds_err(
                    NDS_EINVAL,
                    "versioned: node keys not strictly increasing at item %zu (\"%.64s\")", i, key);
        }
        if (n->level == 0) {
            const vs_entry *e = &n->entries[i];
            if (e->is_inline && e->len > VS_INLINE_MAX)
                return nds_err(NDS_EINVAL, "versioned: inline value of %zu bytes exceeds %d",
                               e->len, VS_INLINE_MAX);
        } else {
            const vs_child *c = &n->children[i];
            if (c->ref.length < VS_HEADER_SIZE + VS_NODE_PAYLOAD_HEAD ||
                c->ref.length > VS_ENVELOPE_MAX)
                return nds_err(NDS_EINVAL,
                               "versioned: child envelope length %" PRIu64 " out of range",
                               c->ref.length);
            if (!nds_add_u64(total, c->keys, &total))
                return nds_err(NDS_EINVAL, "versioned: subtree key counts overflow");
        }
    }
    return 0;
}

int vs_node_encode(const vs_node *n, nds_buf *out, size_t *len, uint32_t *crc) {
    int rc = node_check_for_encode(n);
    if (rc) return rc;
    size_t size = vs_node_payload_size(n);
    if ((rc = envelope_reserve(out, VS_KIND_NODE, size))) return rc;
    uint8_t *payload = out->data + out->len + VS_HEADER_SIZE, *w = payload;
    w[0] = n->level;
    w[1] = 0;
    nds_store_le32(w + 2, (uint32_t)n->n);
    w += VS_NODE_PAYLOAD_HEAD;
    for (size_t i = 0; i < n->n; i++) {
        if (n->level == 0)
            put_entry(&w, &n->entries[i]);
        else
            put_child(&w, &n->children[i]);
    }
    assert((size_t)(w - payload) == size);
    envelope_seal(out, VS_KIND_NODE, size, crc);
    if (len) *len = VS_HEADER_SIZE + size;
    return 0;
}

/* ---- nodes: decoding ------------------------------------------------------------------------- */

/* A cursor over a payload being decoded; item is the item being read, for messages. */
typedef struct reader {
    const uint8_t *p;
    size_t n, pos;
    const char *where;
    size_t item;
} reader;

static int need(reader *r, size_t k, const char *what) {
    if (r->n - r->pos < k)
        return nds_err(NDS_ECORRUPT, "%s: item %zu: truncated %s (%zu bytes needed, %zu left)",
                       r->where, r->item, what, k, r->n - r->pos);
    return 0;
}

static int item_error(const reader *r, const char *fmt, ...) NDS_PRINTF(2, 3);
static int item_error(const reader *r, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nds_err(NDS_ECORRUPT, "%s: item %zu: %s", r->where, r->item, what);
}

/* Reads a key: length, at most VS_KEY_MAX, no NUL, after prev (NULL for the first). */
static int read_key(reader *r, const char *prev, bool may_be_empty, char **out) {
    int rc = need(r, 2, "key length");
    if (rc) return rc;
    size_t klen = (size_t)r->p[r->pos] | (size_t)r->p[r->pos + 1] << 8;
    r->pos += 2;
    if (klen > VS_KEY_MAX) return item_error(r, "key length %zu exceeds %d", klen, VS_KEY_MAX);
    if ((rc = need(r, klen, "key"))) return rc;
    const char *k = (const char *)r->p + r->pos;
    if (memchr(k, '\0', klen)) return item_error(r, "key holds a NUL byte");
    if (klen == 0 && !may_be_empty) return item_error(r, "empty key");
    if (prev) {
        size_t plen = strlen(prev);
        int c = memcmp(prev, k, plen < klen ? plen : klen);
        if (c > 0 || (c == 0 && plen >= klen))
            return item_error(r, "key not after the previous key (keys must increase)");
    }
    char *key = malloc(klen + 1);
    if (!key) return nds_err(NDS_ENOMEM, "%s: out of memory", r->where);
    memcpy(key, k, klen);
    key[klen] = '\0';
    r->pos += klen;
    *out = key;
    return 0;
}

static void read_ref(reader *r, vs_ref *ref) {
    memcpy(ref->object.b, r->p + r->pos, VS_ID_SIZE);
    ref->offset = nds_load_le64(r->p + r->pos + VS_ID_SIZE);
    ref->length = nds_load_le64(r->p + r->pos + VS_ID_SIZE + 8);
    ref->crc = nds_load_le32(r->p + r->pos + VS_ID_SIZE + 16);
    r->pos += VS_ID_SIZE + 20;
}

static int read_entry_value(reader *r, vs_entry *e) {
    int rc = need(r, 9, "version and flags");
    if (rc) return rc;
    e->version = nds_load_le64(r->p + r->pos);
    uint8_t flags = r->p[r->pos + 8];
    r->pos += 9;
    if (flags & ~VS_ENTRY_INLINE) return item_error(r, "unknown flags 0x%02x", flags);
    e->is_inline = flags == VS_ENTRY_INLINE;
    if (!e->is_inline) {
        if ((rc = need(r, VS_ID_SIZE + 20, "value reference"))) return rc;
        read_ref(r, &e->value);
        uint64_t end;
        if (!nds_add_u64(e->value.offset, e->value.length, &end) ||
            !nds_add_u64(end, vs_value_table_size(e->value.length), &end))
            return item_error(r, "value offset + length overflows");
        return 0;
    }
    if ((rc = need(r, 4, "inline length"))) return rc;
    uint32_t len = nds_load_le32(r->p + r->pos);
    r->pos += 4;
    if (len > VS_INLINE_MAX)
        return item_error(r, "inline value of %" PRIu32 " bytes exceeds %d", len, VS_INLINE_MAX);
    if ((rc = need(r, len, "inline value"))) return rc;
    if (len) {
        e->data = malloc(len);
        if (!e->data) return nds_err(NDS_ENOMEM, "%s: out of memory", r->where);
        memcpy(e->data, r->p + r->pos, len);
    }
    e->len = len;
    r->pos += len;
    return 0;
}

static int read_child(reader *r, const char *prev, vs_child *c, uint64_t *total) {
    int rc = read_key(r, prev, r->item == 0, &c->first_key);
    if (rc) return rc;
    if ((rc = need(r, VS_ID_SIZE + 28, "child reference"))) return rc;
    read_ref(r, &c->ref);
    c->keys = nds_load_le64(r->p + r->pos);
    r->pos += 8;
    if (c->ref.length < VS_HEADER_SIZE + VS_NODE_PAYLOAD_HEAD || c->ref.length > VS_ENVELOPE_MAX)
        return item_error(r, "child envelope length %" PRIu64 " outside [%d, %" PRIu64 "]",
                          c->ref.length, VS_HEADER_SIZE + VS_NODE_PAYLOAD_HEAD, VS_ENVELOPE_MAX);
    uint64_t end;
    if (!nds_add_u64(c->ref.offset, c->ref.length, &end))
        return item_error(r, "child offset + length overflows");
    if (!nds_add_u64(*total, c->keys, total)) return item_error(r, "subtree key counts overflow");
    return 0;
}

/* The payload head: level and count, checked against want_level and the bytes present. */
static int read_node_head(reader *r, unsigned want_level, uint8_t *level, size_t *count) {
    if (r->n < VS_NODE_PAYLOAD_HEAD)
        return nds_err(NDS_ECORRUPT,
                       "%s: node payload of %zu bytes is shorter than its %d-byte head", r->where,
                       r->n, VS_NODE_PAYLOAD_HEAD);
    *level = r->p[0];
    if (*level > VS_MAX_LEVEL)
        return nds_err(NDS_ECORRUPT, "%s: node level %u exceeds %d", r->where, *level,
                       VS_MAX_LEVEL);
    if (want_level <= VS_MAX_LEVEL && *level != want_level)
        return nds_err(NDS_ECORRUPT, "%s: node of level %u where level %u was expected", r->where,
                       *level, want_level);
    if (r->p[1] != 0) return nds_err(NDS_ECORRUPT, "%s: node reserved byte is not zero", r->where);
    uint64_t c = nds_load_le32(r->p + 2);
    uint64_t min = c * (*level == 0 ? LEAF_ITEM_MIN : INNER_ITEM_MIN);
    if (min > r->n - VS_NODE_PAYLOAD_HEAD)
        return nds_err(NDS_ECORRUPT,
                       "%s: node claims %" PRIu64
                       " items, more than its %zu payload bytes can hold",
                       r->where, c, r->n);
    if (*level > 0 && c == 0)
        return nds_err(NDS_ECORRUPT, "%s: inner node with no children", r->where);
    *count = (size_t)c;
    r->pos = VS_NODE_PAYLOAD_HEAD;
    return 0;
}

static int read_items(reader *r, vs_node *node, size_t count) {
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++) {
        r->item = i;
        int rc;
        if (node->level == 0) {
            vs_entry *e = &node->entries[i];
            rc = read_key(r, i ? node->entries[i - 1].key : NULL, false, &e->key);
            if (rc == 0) rc = read_entry_value(r, e);
        } else {
            rc = read_child(r, i ? node->children[i - 1].first_key : NULL, &node->children[i],
                            &total);
        }
        node->n = i + 1; /* what vs_node_free must release, read in part or whole */
        if (rc) return rc;
    }
    if (r->pos != r->n)
        return nds_err(NDS_ECORRUPT, "%s: %zu trailing bytes after the node's last item", r->where,
                       r->n - r->pos);
    return 0;
}

int vs_node_decode(const uint8_t *p, size_t n, uint32_t expect_crc, unsigned want_level,
                   const char *where, vs_node **out) {
    *out = NULL;
    where = where_or_default(where);
    reader r = {.where = where};
    uint32_t crc = 0;
    int rc = vs_envelope_open(p, n, VS_KIND_NODE, where, &r.p, &r.n, &crc);
    if (rc) return rc;
    if (crc != expect_crc)
        return nds_err(NDS_ECORRUPT,
                       "%s: node checksum 0x%08" PRIx32 " is not the 0x%08" PRIx32
                       " its parent or commit records",
                       where, crc, expect_crc);
    uint8_t level = 0;
    size_t count = 0;
    if ((rc = read_node_head(&r, want_level, &level, &count))) return rc;
    vs_node *node = calloc(1, sizeof *node);
    if (!node) return nds_err(NDS_ENOMEM, "%s: out of memory", where);
    node->level = level;
    if (count) {
        /* count is bounded by the payload size above, so this allocation is too. */
        if (level == 0)
            node->entries = calloc(count, sizeof *node->entries);
        else
            node->children = calloc(count, sizeof *node->children);
        if (!node->entries && !node->children) {
            free(node);
            return nds_err(NDS_ENOMEM, "%s: out of memory", where);
        }
    }
    if ((rc = read_items(&r, node, count))) {
        vs_node_free(node);
        return rc;
    }
    *out = node;
    return 0;
}

int vs_entry_copy(vs_entry *out, const vs_entry *e) {
    *out = *e;
    out->key = nds_strdup(e->key);
    out->data = NULL;
    if (e->is_inline && e->len) {
        out->data = malloc(e->len);
        if (out->data) memcpy(out->data, e->data, e->len);
    }
    if (!out->key || (e->is_inline && e->len && !out->data)) {
        vs_entry_dispose(out);
        return nds_err(NDS_ENOMEM, "versioned: out of memory copying an entry");
    }
    return 0;
}

void vs_entry_dispose(vs_entry *e) {
    if (!e) return;
    free(e->key);
    free(e->data);
    memset(e, 0, sizeof *e);
}

void vs_node_free(vs_node *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) {
        if (n->level == 0)
            vs_entry_dispose(&n->entries[i]);
        else
            free(n->children[i].first_key);
    }
    free(n->entries);
    free(n->children);
    free(n);
}

/* ---- commits: encoding ----------------------------------------------------------------------- */

/* Adds v as member key of o; a NULL v (out of memory) clears *ok, unless null is meant. */
static void add_member(json_object *o, const char *key, json_object *v, bool null_ok, bool *ok) {
    if (!v && !null_ok) *ok = false;
    if (json_object_object_add(o, key, v) != 0) {
        json_object_put(v);
        *ok = false;
    }
}

static json_object *new_id(const vs_id *id) {
    char hex[VS_ID_HEX];
    vs_id_hex(id, hex);
    return json_object_new_string(hex);
}

/* An array of ids as hex strings. */
static json_object *new_ids(const vs_id *ids, size_t n, bool *ok) {
    json_object *a = json_object_new_array_ext((int)nds_min_u64(n, INT32_MAX));
    for (size_t i = 0; a && i < n; i++)
        if (json_object_array_add(a, new_id(&ids[i])) != 0) *ok = false;
    if (!a) *ok = false;
    return a;
}

/* A ref as {"object","offset","length","crc32c"}; the caller adds what else it needs. */
static json_object *new_ref(const vs_ref *r, bool *ok) {
    json_object *o = json_object_new_object();
    if (!o) {
        *ok = false;
        return NULL;
    }
    add_member(o, "object", new_id(&r->object), false, ok);
    add_member(o, "offset", json_object_new_int64((int64_t)r->offset), false, ok);
    add_member(o, "length", json_object_new_int64((int64_t)r->length), false, ok);
    add_member(o, "crc32c", json_object_new_int64(r->crc), false, ok);
    return o;
}

/* "2026-11-27T05:00:00.123456789Z" for ns since the epoch (informative: readers use time_ns). */
static void format_time(int64_t ns, char out[40]) {
    int64_t sec = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
        frac += 1000000000;
        sec -= 1;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        snprintf(out, 40, "unknown");
        return;
    }
    size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 40 - n, ".%09" PRId64 "Z", frac);
}

static int ref_check_for_encode(const vs_ref *r, uint64_t min_length, const char *what) {
    if (r->offset > JSON_U64_MAX || r->length < min_length || r->length > VS_ENVELOPE_MAX)
        return nds_err(NDS_EINVAL,
                       "versioned: commit's %s reference out of range (offset %" PRIu64
                       ", length %" PRIu64 ")",
                       what, r->offset, r->length);
    return 0;
}

static int commit_check_for_encode(const vs_commit *c) {
    if (c->version < 1 || c->version > JSON_U64_MAX || c->parent != c->version - 1)
        return nds_err(NDS_EINVAL, "versioned: commit version %" PRIu64 " with parent %" PRIu64,
                       c->version, c->parent);
    int rc = 0;
    if (!c->root.empty) {
        rc = ref_check_for_encode(&c->root.ref, VS_HEADER_SIZE + VS_NODE_PAYLOAD_HEAD, "root");
        if (rc == 0 && (c->root.level > VS_MAX_LEVEL || c->root.keys > JSON_U64_MAX))
            rc = nds_err(NDS_EINVAL, "versioned: commit's root level %u or key count out of range",
                         c->root.level);
    }
    if (rc == 0 && c->has_superseded)
        rc = ref_check_for_encode(&c->superseded, VS_HEADER_SIZE + 4, "superseded");
    for (size_t i = 0; rc == 0 && i < c->nobjects; i++)
        if ((c->objects[i].kind != VS_OBJECT_DATA && c->objects[i].kind != VS_OBJECT_INDEX) ||
            c->objects[i].items > JSON_U64_MAX)
            rc = nds_err(NDS_EINVAL, "versioned: commit's object %zu has an invalid kind or count",
                         i);
    return rc;
}

static json_object *new_root(const vs_root *root, bool *ok) {
    if (root->empty) return NULL;
    json_object *o = new_ref(&root->ref, ok);
    if (o) {
        add_member(o, "level", json_object_new_int(root->level), false, ok);
        add_member(o, "keys", json_object_new_int64((int64_t)root->keys), false, ok);
    }
    return o;
}

static json_object *new_objects(const vs_commit *c, bool *ok) {
    json_object *a = json_object_new_array_ext((int)nds_min_u64(c->nobjects, INT32_MAX));
    if (!a) {
        *ok = false;
        return NULL;
    }
    for (size_t i = 0; i < c->nobjects && *ok; i++) {
        json_object *o = json_object_new_object();
        if (!o || json_object_array_add(a, o) != 0) {
            json_object_put(o);
            *ok = false;
            break;
        }
        const vs_object_count *oc = &c->objects[i];
        add_member(o, "object", new_id(&oc->object), false, ok);
        add_member(o, "kind", json_object_new_string(oc->kind == VS_OBJECT_DATA ? "data" : "index"),
                   false, ok);
        add_member(o, "items", json_object_new_int64((int64_t)oc->items), false, ok);
    }
    return a;
}

/* The metadata text as a JSON object (NDS_EINVAL when it is not one). */
static int parse_metadata(const char *text, json_object **out) {
    int rc = nds_json_parse(text, strlen(text), "versioned: commit metadata", out);
    if (rc) return rc == NDS_EFORMAT ? nds_err(NDS_EINVAL, "%s", nds_error_last()->message) : rc;
    if (!json_object_is_type(*out, json_type_object)) {
        json_object_put(*out);
        return nds_err(NDS_EINVAL, "versioned: commit metadata must be a json object");
    }
    return 0;
}

static int build_commit(const vs_commit *c, json_object *o) {
    bool ok = true;
    char when[40];
    format_time(c->time_ns, when);
    add_member(o, "format", json_object_new_string(FORMAT_NAME), false, &ok);
    add_member(o, "format_version", json_object_new_int(VS_FORMAT_VERSION), false, &ok);
    add_member(o, "version", json_object_new_int64((int64_t)c->version), false, &ok);
    add_member(o, "parent", json_object_new_int64((int64_t)c->parent), false, &ok);
    add_member(o, "time_ns", json_object_new_int64(c->time_ns), false, &ok);
    add_member(o, "time", json_object_new_string(when), false, &ok);
    if (c->message) add_member(o, "message", json_object_new_string(c->message), false, &ok);
    if (c->metadata) {
        json_object *m;
        int rc = parse_metadata(c->metadata, &m);
        if (rc) return rc;
        add_member(o, "metadata", m, false, &ok);
    }
    add_member(o, "root", new_root(&c->root, &ok), c->root.empty, &ok);
    add_member(o, "objects", new_objects(c, &ok), false, &ok);
    add_member(o, "superseded", c->has_superseded ? new_ref(&c->superseded, &ok) : NULL,
               !c->has_superseded, &ok);
    if (c->ntokens) add_member(o, "tokens", new_ids(c->tokens, c->ntokens, &ok), false, &ok);
    return ok ? 0 : nds_err(NDS_ENOMEM, "versioned: out of memory encoding a commit");
}

/* Appends o (built with status rc) as an envelope of kind k, and drops o. */
static int append_json(json_object *o, int rc, vs_kind k, nds_buf *out) {
    if (rc == 0) {
        size_t len;
        const char *text = json_object_to_json_string_length(
            o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        rc = text ? vs_envelope_append(out, k, (const uint8_t *)text, len, NULL)
                  : nds_err(NDS_ENOMEM, "versioned: out of memory encoding %s", kind_name(k));
    }
    json_object_put(o);
    return rc;
}

int vs_commit_encode(const vs_commit *c, nds_buf *out) {
    int rc = commit_check_for_encode(c);
    if (rc) return rc;
    json_object *o = json_object_new_object();
    if (!o) return nds_err(NDS_ENOMEM, "versioned: out of memory encoding a commit");
    rc = build_commit(c, o);
    return append_json(o, rc, VS_KIND_COMMIT, out);
}

/* ---- commits and tags: strict JSON reading --------------------------------------------------- */

/* The json helpers report NDS_EFORMAT; a stored object that fails them is corrupt. */
static int as_corrupt(int rc) {
    if (rc != NDS_EFORMAT) return rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", nds_error_last()->message);
    return nds_err(NDS_ECORRUPT, "%s", msg);
}

/* A required integer member, a JSON integer (not 5.0) in [min, max]. */
static int get_int(json_object *obj, const char *key, int64_t min, int64_t max, const char *doc,
                   int64_t *out) {
    json_object *v;
    if (json_object_object_get_ex(obj, key, &v) && !json_object_is_type(v, json_type_int))
        return nds_err(NDS_ECORRUPT, "%s: \"%s\" must be an integer", doc, key);
    return as_corrupt(nds_json_get_int(obj, key, false, min, max, doc, out));
}

static int get_u64(json_object *obj, const char *key, uint64_t min, uint64_t max, const char *doc,
                   uint64_t *out) {
    int64_t v;
    int rc = get_int(obj, key, (int64_t)min, (int64_t)max, doc, &v);
    if (rc == 0) *out = (uint64_t)v;
    return rc;
}

/* A required member that must be present, of type t, or (null_ok) null. */
static int get_typed(json_object *obj, const char *key, json_type t, bool null_ok, const char *doc,
                     json_object **out) {
    int rc = as_corrupt(nds_json_member(obj, key, doc, out));
    if (rc) return rc;
    if (json_object_is_type(*out, t) || (null_ok && *out == NULL)) return 0;
    return nds_err(NDS_ECORRUPT, "%s: \"%s\" must be %s%s", doc, key,
                   t == json_type_object  ? "an object"
                   : t == json_type_array ? "an array"
                                          : "a string",
                   null_ok ? " or null" : "");
}

static int get_id(json_object *obj, const char *doc, vs_id *id) {
    json_object *v;
    int rc = get_typed(obj, "object", json_type_string, false, doc, &v);
    if (rc == 0 && vs_id_parse(json_object_get_string(v), id) != 0)
        rc = nds_err(NDS_ECORRUPT, "%s: \"object\" is not 32 lower-case hex digits", doc);
    return rc;
}

static int get_ref(json_object *o, uint64_t min_length, const char *doc, vs_ref *r) {
    uint64_t crc;
    int rc = get_id(o, doc, &r->object);
    if (rc == 0) rc = get_u64(o, "offset", 0, JSON_U64_MAX, doc, &r->offset);
    if (rc == 0) rc = get_u64(o, "length", min_length, VS_ENVELOPE_MAX, doc, &r->length);
    if (rc == 0) rc = get_u64(o, "crc32c", 0, UINT32_MAX, doc, &crc);
    if (rc == 0) r->crc = (uint32_t)crc;
    return rc;
}

/* Opens a JSON envelope of kind k: its payload parsed, an object. */
static int open_json(const uint8_t *p, size_t n, vs_kind k, const char *where, json_object **out) {
    const uint8_t *payload = NULL;
    size_t len = 0;
    int rc = vs_envelope_open(p, n, k, where, &payload, &len, NULL);
    if (rc) return rc;
    if ((rc = as_corrupt(nds_json_parse((const char *)payload, len, where, out)))) return rc;
    if (json_object_is_type(*out, json_type_object)) return 0;
    json_object_put(*out);
    *out = NULL;
    return nds_err(NDS_ECORRUPT, "%s: payload is not a json object", where);
}

/* ---- commits: decoding ----------------------------------------------------------------------- */

/* The "format_version" of a commit or prepared set: one this ndstore reads. */
static int check_format_version(json_object *o, const char *where) {
    int64_t fv;
    int rc = get_int(o, "format_version", 1, INT64_MAX, where, &fv);
    if (rc == 0 && fv > VS_FORMAT_VERSION)
        rc = nds_err(NDS_ECORRUPT,
                     "%s: format_version %" PRId64 " is newer than this ndstore reads (%d)", where,
                     fv, VS_FORMAT_VERSION);
    return rc;
}

static int read_commit_head(json_object *o, uint64_t expect, const char *where, vs_commit *c) {
    json_object *v;
    int rc = get_typed(o, "format", json_type_string, false, where, &v);
    if (rc) return rc;
    if (strcmp(json_object_get_string(v), FORMAT_NAME) != 0)
        return nds_err(NDS_ECORRUPT, "%s: \"format\" is \"%.64s\", not \"" FORMAT_NAME "\"", where,
                       json_object_get_string(v));
    if ((rc = check_format_version(o, where))) return rc;
    if ((rc = get_u64(o, "version", 1, JSON_U64_MAX, where, &c->version))) return rc;
    if ((rc = get_u64(o, "parent", 0, JSON_U64_MAX, where, &c->parent))) return rc;
    if (c->parent != c->version - 1)
        return nds_err(NDS_ECORRUPT, "%s: \"parent\" is %" PRIu64 ", not version %" PRIu64 " - 1",
                       where, c->parent, c->version);
    if (c->version != expect)
        return nds_err(NDS_ECORRUPT, "%s holds version %" PRIu64, where, c->version);
    return get_int(o, "time_ns", INT64_MIN, INT64_MAX, where, &c->time_ns);
}

static int read_commit_text(json_object *o, const char *where, vs_commit *c) {
    json_object *v;
    if (json_object_object_get_ex(o, "message", &v)) {
        int rc = get_typed(o, "message", json_type_string, false, where, &v);
        if (rc) return rc;
        size_t len = (size_t)json_object_get_string_len(v);
        const char *s = json_object_get_string(v);
        if (memchr(s, '\0', len))
            return nds_err(NDS_ECORRUPT, "%s: \"message\" holds a NUL character", where);
        if (!(c->message = nds_strdup(s))) return nds_err(NDS_ENOMEM, "%s: out of memory", where);
    }
    if (json_object_object_get_ex(o, "metadata", &v)) {
        int rc = get_typed(o, "metadata", json_type_object, false, where, &v);
        if (rc) return rc;
        if (!(c->metadata = nds_json_to_string(v, false)))
            return nds_err(NDS_ENOMEM, "%s: out of memory", where);
    }
    return 0;
}

static int read_commit_root(json_object *o, const char *where, vs_commit *c) {
    json_object *v;
    int rc = get_typed(o, "root", json_type_object, true, where, &v);
    if (rc) return rc;
    c->root.empty = v == NULL;
    if (!v) return 0;
    char doc[512];
    snprintf(doc, sizeof doc, "%s: member \"root\"", where);
    uint64_t level = 0;
    rc = get_ref(v, VS_HEADER_SIZE + VS_NODE_PAYLOAD_HEAD, doc, &c->root.ref);
    if (rc == 0) rc = get_u64(v, "level", 0, VS_MAX_LEVEL, doc, &level);
    if (rc == 0) rc = get_u64(v, "keys", 0, JSON_U64_MAX, doc, &c->root.keys);
    c->root.level = (uint8_t)level;
    return rc;
}

static int read_commit_object(json_object *o, size_t i, const char *where, vs_object_count *oc) {
    char doc[512];
    snprintf(doc, sizeof doc, "%s: member \"objects\" item %zu", where, i);
    if (!json_object_is_type(o, json_type_object))
        return nds_err(NDS_ECORRUPT, "%s: must be an object", doc);
    json_object *k;
    int rc = get_id(o, doc, &oc->object);
    if (rc == 0) rc = get_typed(o, "kind", json_type_string, false, doc, &k);
    if (rc) return rc;
    const char *kind = json_object_get_string(k);
    if (strcmp(kind, "data") == 0)
        oc->kind = VS_OBJECT_DATA;
    else if (strcmp(kind, "index") == 0)
        oc->kind = VS_OBJECT_INDEX;
    else
        return nds_err(NDS_ECORRUPT, "%s: \"kind\" is \"%.32s\", not \"data\" or \"index\"", doc,
                       kind);
    return get_u64(o, "items", 0, JSON_U64_MAX, doc, &oc->items);
}

static int read_commit_objects_only(json_object *o, const char *where, vs_commit *c) {
    json_object *a;
    int rc = get_typed(o, "objects", json_type_array, false, where, &a);
    if (rc) return rc;
    size_t n = json_object_array_length(a);
    if (n && !(c->objects = calloc(n, sizeof *c->objects)))
        return nds_err(NDS_ENOMEM, "%s: out of memory", where);
    for (size_t i = 0; i < n; i++) {
        if ((rc = read_commit_object(json_object_array_get_idx(a, i), i, where, &c->objects[i])))
            return rc;
        c->nobjects = i + 1;
    }
    return 0;
}

static int read_commit_objects(json_object *o, const char *where, vs_commit *c) {
    json_object *s;
    int rc = read_commit_objects_only(o, where, c);
    if (rc) return rc;
    if ((rc = get_typed(o, "superseded", json_type_object, true, where, &s))) return rc;
    c->has_superseded = s != NULL;
    if (!s) return 0;
    char doc[512];
    snprintf(doc, sizeof doc, "%s: member \"superseded\"", where);
    return get_ref(s, VS_HEADER_SIZE + 4, doc, &c->superseded);
}

/* An optional member: an array of ids (hex strings). */
static int read_ids(json_object *o, const char *key, const char *where, vs_id **ids, size_t *n) {
    json_object *a;
    *ids = NULL;
    *n = 0;
    if (!json_object_object_get_ex(o, key, &a)) return 0;
    if (!json_object_is_type(a, json_type_array))
        return nds_err(NDS_ECORRUPT, "%s: \"%s\" must be an array", where, key);
    size_t count = json_object_array_length(a);
    if (count && !(*ids = calloc(count, sizeof **ids)))
        return nds_err(NDS_ENOMEM, "%s: out of memory", where);
    for (size_t i = 0; i < count; i++) {
        json_object *v = json_object_array_get_idx(a, i);
        if (!json_object_is_type(v, json_type_string) ||
            vs_id_parse(json_object_get_string(v), &(*ids)[i]) != 0)
            return nds_err(NDS_ECORRUPT, "%s: \"%s\"[%zu] is not 32 lower-case hex digits", where,
                           key, i);
        *n = i + 1;
    }
    return 0;
}

int vs_commit_decode(const uint8_t *p, size_t n, uint64_t expect_version, const char *where,
                     vs_commit *out) {
    memset(out, 0, sizeof *out);
    where = where_or_default(where);
    json_object *o;
    int rc = open_json(p, n, VS_KIND_COMMIT, where, &o);
    if (rc) return rc;
    rc = read_commit_head(o, expect_version, where, out);
    if (rc == 0) rc = read_commit_text(o, where, out);
    if (rc == 0) rc = read_commit_root(o, where, out);
    if (rc == 0) rc = read_commit_objects(o, where, out);
    if (rc == 0) rc = read_ids(o, "tokens", where, &out->tokens, &out->ntokens);
    json_object_put(o);
    if (rc) vs_commit_dispose(out);
    return rc;
}

void vs_commit_dispose(vs_commit *c) {
    if (!c) return;
    free(c->message);
    free(c->metadata);
    free(c->objects);
    free(c->tokens);
    memset(c, 0, sizeof *c);
}

/* ---- superseded lists ------------------------------------------------------------------------ */

int vs_superseded_encode(const vs_superseded *s, size_t n, nds_buf *out, size_t *len,
                         uint32_t *crc) {
    if (n > (UINT32_MAX - 4) / SUPERSEDED_ITEM_SIZE)
        return nds_err(NDS_ELIMIT, "versioned: superseded list of %zu objects is too long", n);
    size_t size = 4 + n * SUPERSEDED_ITEM_SIZE;
    int rc = envelope_reserve(out, VS_KIND_SUPERSEDED, size);
    if (rc) return rc;
    /* Written in place; out->len moves only at the seal, so a refusal leaves out as it was. */
    uint8_t *payload = out->data + out->len + VS_HEADER_SIZE;
    nds_store_le32(payload, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        uint8_t *w = payload + 4 + i * SUPERSEDED_ITEM_SIZE;
        if (s[i].kind != VS_OBJECT_DATA && s[i].kind != VS_OBJECT_INDEX)
            return nds_err(NDS_EINVAL, "versioned: superseded item %zu has kind %d", i,
                           (int)s[i].kind);
        memcpy(w, s[i].object.b, VS_ID_SIZE);
        w[VS_ID_SIZE] = (uint8_t)s[i].kind;
        nds_store_le64(w + VS_ID_SIZE + 1, s[i].items);
    }
    envelope_seal(out, VS_KIND_SUPERSEDED, size, crc);
    if (len) *len = VS_HEADER_SIZE + size;
    return 0;
}

static int superseded_payload_check(const uint8_t *p, size_t n, const char *where, size_t *count) {
    if (n < 4)
        return nds_err(NDS_ECORRUPT, "%s: superseded list payload of %zu bytes has no count", where,
                       n);
    uint64_t c = nds_load_le32(p);
    if (c * SUPERSEDED_ITEM_SIZE != n - 4)
        return nds_err(NDS_ECORRUPT,
                       "%s: superseded list claims %" PRIu64 " items (%" PRIu64
                       " bytes) but holds %zu bytes",
                       where, c, c * SUPERSEDED_ITEM_SIZE, n - 4);
    for (uint64_t i = 0; i < c; i++) {
        uint8_t kind = p[4 + i * SUPERSEDED_ITEM_SIZE + VS_ID_SIZE];
        if (kind != VS_OBJECT_DATA && kind != VS_OBJECT_INDEX)
            return nds_err(NDS_ECORRUPT, "%s: superseded item %" PRIu64 ": unknown kind %u", where,
                           i, kind);
    }
    *count = (size_t)c;
    return 0;
}

int vs_superseded_decode(const uint8_t *p, size_t n, uint32_t expect_crc, const char *where,
                         vs_superseded **out, size_t *count) {
    *out = NULL;
    *count = 0;
    where = where_or_default(where);
    const uint8_t *payload = NULL;
    size_t len = 0, c = 0;
    uint32_t crc = 0;
    int rc = vs_envelope_open(p, n, VS_KIND_SUPERSEDED, where, &payload, &len, &crc);
    if (rc) return rc;
    if (crc != expect_crc)
        return nds_err(NDS_ECORRUPT,
                       "%s: superseded list checksum 0x%08" PRIx32 " is not the 0x%08" PRIx32
                       " its commit records",
                       where, crc, expect_crc);
    if ((rc = superseded_payload_check(payload, len, where, &c))) return rc;
    if (c == 0) return 0;
    vs_superseded *s = calloc(c, sizeof *s); /* c is bounded by the payload size */
    if (!s) return nds_err(NDS_ENOMEM, "%s: out of memory", where);
    for (size_t i = 0; i < c; i++) {
        const uint8_t *r = payload + 4 + i * SUPERSEDED_ITEM_SIZE;
        memcpy(s[i].object.b, r, VS_ID_SIZE);
        s[i].kind = (vs_object_kind)r[VS_ID_SIZE];
        s[i].items = nds_load_le64(r + VS_ID_SIZE + 1);
    }
    *out = s;
    *count = c;
    return 0;
}

/* ---- prepared sets ------------------------------------------------------------------------- */

#define PREPARED_FORMAT "ndstore-versioned-prepared"

static json_object *new_generation(const nds_generation *g) {
    if (g->kind == NDS_GEN_NONE) return NULL;
    return json_object_new_string(g->kind == NDS_GEN_ABSENT ? "absent" : g->value);
}

static int build_prepared(const vs_prepared *p, json_object *o) {
    bool ok = true;
    add_member(o, "format", json_object_new_string(PREPARED_FORMAT), false, &ok);
    add_member(o, "format_version", json_object_new_int(VS_FORMAT_VERSION), false, &ok);
    add_member(o, "base_version", json_object_new_int64((int64_t)p->base_version), false, &ok);
    add_member(o, "time_ns", json_object_new_int64(p->time_ns), false, &ok);
    json_object *ops = json_object_new_array(), *side = json_object_new_array();
    add_member(o, "ops", ops, false, &ok);
    add_member(o, "side", side, false, &ok);
    for (size_t i = 0; ok && i < p->nops; i++) {
        const vs_prepared_op *op = &p->ops[i];
        json_object *e = json_object_new_object();
        if (!e || json_object_array_add(ops, e) != 0) {
            json_object_put(e);
            ok = false;
            break;
        }
        add_member(e, "key", json_object_new_string(op->key), false, &ok);
        add_member(e, "if_equal", new_generation(&op->if_equal), true, &ok);
        add_member(e, "value", op->is_delete ? NULL : new_ref(&op->value, &ok), op->is_delete,
                   &ok);
    }
    for (size_t i = 0; ok && i < p->nside; i++) {
        json_object *e = json_object_new_object();
        if (!e || json_object_array_add(side, e) != 0) {
            json_object_put(e);
            ok = false;
            break;
        }
        add_member(e, "name", json_object_new_string(p->side[i].name), false, &ok);
        add_member(e, "value", new_ref(&p->side[i].value, &ok), false, &ok);
    }
    vs_commit objects = {.objects = p->objects, .nobjects = p->nobjects};
    add_member(o, "objects", new_objects(&objects, &ok), false, &ok);
    return ok ? 0 : nds_err(NDS_ENOMEM, "versioned: out of memory encoding a prepared set");
}

int vs_prepared_encode(const vs_prepared *p, nds_buf *out) {
    json_object *o = json_object_new_object();
    if (!o) return nds_err(NDS_ENOMEM, "versioned: out of memory encoding a prepared set");
    return append_json(o, build_prepared(p, o), VS_KIND_PREPARED, out);
}

static int get_key_string(json_object *e, const char *member, const char *doc, char **out) {
    json_object *v;
    int rc = get_typed(e, member, json_type_string, false, doc, &v);
    if (rc) return rc;
    const char *text = json_object_get_string(v);
    size_t len = strlen(text);
    if (len == 0 || len > VS_KEY_MAX || len != (size_t)json_object_get_string_len(v))
        return nds_err(NDS_ECORRUPT, "%s: \"%s\" must have 1 to %d bytes and no NUL", doc, member,
                       VS_KEY_MAX);
    if (!(*out = nds_strdup(text))) return nds_err(NDS_ENOMEM, "out of memory");
    return 0;
}

static int read_generation(json_object *e, const char *doc, nds_generation *g) {
    json_object *v = NULL;
    g->kind = NDS_GEN_NONE;
    if (!json_object_object_get_ex(e, "if_equal", &v) || v == NULL) return 0;
    if (!json_object_is_type(v, json_type_string) ||
        (size_t)json_object_get_string_len(v) >= NDS_GENERATION_MAX)
        return nds_err(NDS_ECORRUPT, "%s: \"if_equal\" must be null, \"absent\" or a generation",
                       doc);
    if (strcmp(json_object_get_string(v), "absent") == 0) g->kind = NDS_GEN_ABSENT;
    else nds_generation_set(g, json_object_get_string(v));
    return 0;
}

static int read_prepared_op(json_object *e, size_t i, const char *where, vs_prepared_op *op) {
    char doc[600];
    snprintf(doc, sizeof doc, "%s: ops[%zu]", where, i);
    if (!json_object_is_type(e, json_type_object))
        return nds_err(NDS_ECORRUPT, "%s must be an object", doc);
    json_object *value;
    int rc = get_key_string(e, "key", doc, &op->key);
    if (rc == 0) rc = read_generation(e, doc, &op->if_equal);
    if (rc == 0) rc = get_typed(e, "value", json_type_object, true, doc, &value);
    if (rc) return rc;
    op->is_delete = value == NULL;
    return value ? get_ref(value, 0, doc, &op->value) : 0;
}

static int read_prepared_side(json_object *e, size_t i, const char *where, vs_prepared_side *s) {
    char doc[600];
    snprintf(doc, sizeof doc, "%s: side[%zu]", where, i);
    if (!json_object_is_type(e, json_type_object))
        return nds_err(NDS_ECORRUPT, "%s must be an object", doc);
    json_object *value;
    int rc = get_key_string(e, "name", doc, &s->name);
    if (rc == 0) rc = get_typed(e, "value", json_type_object, false, doc, &value);
    return rc ? rc : get_ref(value, 0, doc, &s->value);
}

static int read_prepared_lists(json_object *o, const char *where, vs_prepared *p) {
    json_object *ops, *side;
    int rc = get_typed(o, "ops", json_type_array, false, where, &ops);
    if (rc == 0) rc = get_typed(o, "side", json_type_array, false, where, &side);
    if (rc) return rc;
    size_t nops = json_object_array_length(ops), nside = json_object_array_length(side);
    if ((nops && !(p->ops = calloc(nops, sizeof *p->ops))) ||
        (nside && !(p->side = calloc(nside, sizeof *p->side))))
        return nds_err(NDS_ENOMEM, "%s: out of memory", where);
    for (size_t i = 0; i < nops; i++) {
        p->nops = i + 1;
        if ((rc = read_prepared_op(json_object_array_get_idx(ops, i), i, where, &p->ops[i])))
            return rc;
    }
    for (size_t i = 0; i < nside; i++) {
        p->nside = i + 1;
        if ((rc = read_prepared_side(json_object_array_get_idx(side, i), i, where, &p->side[i])))
            return rc;
    }
    vs_commit objects = {0};
    rc = read_commit_objects_only(o, where, &objects);
    p->objects = objects.objects;
    p->nobjects = objects.nobjects;
    return rc;
}

int vs_prepared_decode(const uint8_t *p, size_t n, const char *where, vs_prepared *out) {
    memset(out, 0, sizeof *out);
    where = where_or_default(where);
    json_object *o, *v;
    int rc = open_json(p, n, VS_KIND_PREPARED, where, &o);
    if (rc) return rc;
    rc = get_typed(o, "format", json_type_string, false, where, &v);
    if (rc == 0 && strcmp(json_object_get_string(v), PREPARED_FORMAT) != 0)
        rc = nds_err(NDS_ECORRUPT, "%s: not a prepared set (format \"%s\")", where,
                     json_object_get_string(v));
    if (rc == 0) rc = check_format_version(o, where); /* a newer set may mean more than we see */
    if (rc == 0) rc = get_u64(o, "base_version", 0, JSON_U64_MAX, where, &out->base_version);
    if (rc == 0) rc = get_int(o, "time_ns", INT64_MIN, INT64_MAX, where, &out->time_ns);
    if (rc == 0) rc = read_prepared_lists(o, where, out);
    json_object_put(o);
    if (rc) vs_prepared_dispose(out);
    return rc;
}

void vs_prepared_dispose(vs_prepared *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nops; i++) free(p->ops[i].key);
    for (size_t i = 0; i < p->nside; i++) free(p->side[i].name);
    free(p->ops);
    free(p->side);
    free(p->objects);
    memset(p, 0, sizeof *p);
}

/* ---- tags ------------------------------------------------------------------------------------ */

int vs_tag_encode(uint64_t version, int64_t time_ns, nds_buf *out) {
    if (version > JSON_U64_MAX)
        return nds_err(NDS_EINVAL, "versioned: tag of version %" PRIu64, version);
    char text[96];
    int len = snprintf(text, sizeof text, "{\"version\":%" PRIu64 ",\"time_ns\":%" PRId64 "}",
                       version, time_ns);
    return vs_envelope_append(out, VS_KIND_TAG, (const uint8_t *)text, (size_t)len, NULL);
}

int vs_tag_decode(const uint8_t *p, size_t n, const char *where, uint64_t *version) {
    where = where_or_default(where);
    json_object *o;
    int rc = open_json(p, n, VS_KIND_TAG, where, &o);
    if (rc) return rc;
    int64_t t;
    uint64_t v;
    rc = get_u64(o, "version", 0, JSON_U64_MAX, where, &v);
    if (rc == 0) rc = get_int(o, "time_ns", INT64_MIN, INT64_MAX, where, &t);
    json_object_put(o);
    if (rc == 0) *version = v;
    return rc;
}

bool vs_tag_name_valid(const char *name) {
    size_t len = strlen(name);
    if (len == 0 || len > 128 || strcmp(name, "latest") == 0) return false;
    /* "." and ".." would name the tags folder or its parent on a file system. */
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return false;
    bool all_digits = true;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool digit = c >= '0' && c <= '9';
        if (!digit && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && c != '.' && c != '_' &&
            c != '-')
            return false;
        all_digits = all_digits && digit;
    }
    return !all_digits;
}
