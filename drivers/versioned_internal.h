/* The versioned kvstore adapter's on-disk structures and index tree (docs/versioned-format.md).
 *
 * Three files share this header: versioned_format.c (object names, envelopes, node / commit / tag /
 * superseded-list codecs, value checksums), versioned_tree.c (the copy-on-write B+tree over nodes
 * loaded and stored through a vs_tree_io) and kv_versioned.c (the driver: head, reads, commits).
 *
 * Byte layout (all integers little-endian). Every node, commit, tag and superseded list is an
 * envelope: VS_HEADER_SIZE bytes of header, then the payload:
 *   magic "NDSV" (4) | kind (1: 'C' commit, 'N' node, 'S' superseded list, 'T' tag, 'D' data object)
 *   | format version (1: VS_FORMAT_VERSION) | reserved (2: zero) | payload length (u32)
 *   | crc32c of the payload (u32)
 * A data object is one envelope of kind 'D' whose payload is its values back to back (value offsets
 * count from the object's first byte, so the first value starts at VS_HEADER_SIZE). An index object
 * is envelopes of kind 'N' and 'S' back to back, with nothing around them.
 *
 * Node payload: level (u8: 0 leaf) | reserved (u8: zero) | count (u32) | count items, keys strictly
 * increasing (byte order, as memcmp):
 *   leaf item:  key length (u16) | key | version (u64) | flags (u8: VS_ENTRY_INLINE or 0) |
 *               inline: length (u32) | bytes
 *               else:   object id (16) | offset (u64) | length (u64) | crc32c (u32)
 *   inner item: key length (u16) | first key of the child | object id (16) | offset (u64) |
 *               envelope length (u64) | payload crc32c (u32) | keys in the child's subtree (u64)
 * A child's level is its parent's minus one; an inner node's first item may have an empty key.
 *
 * Stored value: its bytes, then, when it is longer than VS_BLOCK_SIZE, the crc32c of each
 * VS_BLOCK_SIZE block (the last may be shorter) as u32s. The reference's crc is the crc32c of the
 * value for one block, else the crc32c of that table.
 *
 * Threading: the codecs and tree functions are reentrant; a vs_tree_io's functions are called from
 * the calling thread only. Ownership: decoded nodes and commits own their memory (vs_node_free,
 * vs_commit_dispose).
 */
#ifndef NDS_DRIVERS_VERSIONED_INTERNAL_H
#define NDS_DRIVERS_VERSIONED_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ndstore/kvstore.h"
#include "ndstore/sys/buf.h"

#define VS_MAGIC "NDSV"
#define VS_FORMAT_VERSION 1
#define VS_HEADER_SIZE 16
#define VS_ID_SIZE 16
#define VS_ID_HEX (2 * VS_ID_SIZE + 1)
/* An id's first bytes: its creation time in ms, big-endian (vs_id_random); the rest is random. */
#define VS_ID_TIME_BYTES 6
/* Values longer than one block carry a crc32c per block, so a byte range is checked by reading only
 * the blocks it touches. */
#define VS_BLOCK_SIZE ((uint64_t)1 << 20)
/* Values up to this size live in their leaf: metadata documents cost no extra read. */
#define VS_INLINE_MAX 512
/* A node whose encoded payload would exceed this splits (a node with one item may exceed it). */
#define VS_NODE_TARGET ((size_t)64 << 10)
/* Keys are at most this long (the u16 length field; long enough for any chunk key). */
#define VS_KEY_MAX 4096
/* Deeper trees than this are corrupt (a fan-out of 2 would need 2^32 keys). */
#define VS_MAX_LEVEL 32
/* Envelopes larger than this are corrupt (nodes are about VS_NODE_TARGET; data objects are bounded
 * by the writer to VS_DATA_OBJECT_MAX plus one value). */
#define VS_ENVELOPE_MAX ((uint64_t)1 << 32)
/* A data object is closed once it holds this many bytes (one larger value gets an object of its
 * own). */
#define VS_DATA_OBJECT_MAX ((size_t)64 << 20)

#define VS_ENTRY_INLINE 1u

#define VS_COMMIT_PREFIX "commits/"
#define VS_DATA_PREFIX "data/"
#define VS_INDEX_PREFIX "index/"
#define VS_TAG_PREFIX "tags/"
#define VS_HEAD_HINT "head"
#define VS_PREPARED_PREFIX "prepared/"
/* Longest object key: "commits/" + 20 digits, or a prefix + 32 hex digits, plus NUL. */
#define VS_OBJECT_KEY_MAX 64

typedef enum vs_kind {
    VS_KIND_COMMIT = 'C',
    VS_KIND_NODE = 'N',
    VS_KIND_SUPERSEDED = 'S',
    VS_KIND_TAG = 'T',
    VS_KIND_DATA = 'D',
    VS_KIND_PREPARED = 'P'
} vs_kind;

/** An object's random 128-bit name. */
typedef struct vs_id {
    uint8_t b[VS_ID_SIZE];
} vs_id;

/** Bytes inside an immutable object: a node's envelope, or a stored value. */
typedef struct vs_ref {
    vs_id object;
    uint64_t offset; /**< first byte in the object */
    uint64_t length; /**< a node's envelope length (header included); a value's length (its table
                          not included) */
    uint32_t crc;    /**< a node's payload crc32c; a value's (see the header comment) */
} vs_ref;

/** One key of a leaf. */
typedef struct vs_entry {
    char *key;          /**< NUL-terminated, owned */
    uint64_t version;   /**< the version whose commit wrote this value: the key's generation */
    bool is_inline;
    vs_ref value;       /**< !is_inline: where the value is */
    uint8_t *data;      /**< is_inline: the value (owned; may be NULL when len is 0) */
    size_t len;
} vs_entry;

/** One child of an inner node. */
typedef struct vs_child {
    char *first_key; /**< owned; the smallest key of the child's subtree (may be "" for child 0) */
    vs_ref ref;
    uint64_t keys;   /**< keys in the child's subtree */
} vs_child;

typedef struct vs_node {
    uint8_t level;       /**< 0 leaf */
    size_t n;            /**< items */
    vs_entry *entries;   /**< level 0 */
    vs_child *children;  /**< level > 0 */
} vs_node;

/** A version's tree: empty, or a root node. */
typedef struct vs_root {
    bool empty;
    vs_ref ref;
    uint8_t level;
    uint64_t keys;
} vs_root;

/* ---- sizes of the encoding (the tree's split decisions use these) ---------------------------- */

#define VS_NODE_PAYLOAD_HEAD 6

static inline size_t vs_entry_encoded_size(const vs_entry *e) {
    return 2 + strlen(e->key) + 8 + 1 + (e->is_inline ? 4 + e->len : VS_ID_SIZE + 8 + 8 + 4);
}
static inline size_t vs_child_encoded_size(const vs_child *c) {
    return 2 + strlen(c->first_key) + VS_ID_SIZE + 8 + 8 + 4 + 8;
}

/* ---- versioned_format.c: names ----------------------------------------------------------------- */

/** A fresh id: creation time (ms, VS_ID_TIME_BYTES) then random bytes (getrandom).
 *  @return 0 or NDS_EIO */
int vs_id_random(vs_id *id);
/** Lower-case hex of id into out. */
void vs_id_hex(const vs_id *id, char out[VS_ID_HEX]);
/** Parses 32 lower-case hex digits. @return 0 or NDS_EINVAL (no message set) */
int vs_id_parse(const char *hex, vs_id *id);
/** "commits/" + version as 20 decimal digits (so keys sort as versions do). */
void vs_commit_key(uint64_t version, char out[VS_OBJECT_KEY_MAX]);
/** Parses a key made by vs_commit_key (the part after the prefix included). @return 0 or -1 */
int vs_commit_key_parse(const char *key, uint64_t *version);
/** prefix (VS_DATA_PREFIX or VS_INDEX_PREFIX) + hex of id. */
void vs_object_key(const char *prefix, const vs_id *id, char out[VS_OBJECT_KEY_MAX]);

/* ---- versioned_format.c: envelopes --------------------------------------------------------------- */

/** Appends header + payload to out; *crc (may be NULL) gets the payload's crc32c. */
int vs_envelope_append(nds_buf *out, vs_kind kind, const uint8_t *payload, size_t len,
                       uint32_t *crc);
/**
 * Checks the envelope p[0..n) (exactly one envelope: magic, kind want, format version, reserved
 * zero, length n - VS_HEADER_SIZE, payload crc32c) and returns its payload. where names it in
 * errors ("index object index/ab.. at 4096"). @return 0 or NDS_ECORRUPT
 */
int vs_envelope_open(const uint8_t *p, size_t n, vs_kind want, const char *where,
                     const uint8_t **payload, size_t *len, uint32_t *crc);
/** Reserves a data object's header in an empty out (values are appended after it). */
int vs_data_begin(nds_buf *out);
/** Fills the header of a data object built with vs_data_begin + vs_value_append. */
void vs_data_finish(nds_buf *out);
/** The header of a data object whose payload (everything after the header) has payload_len bytes
 *  with crc32c payload_crc: for writers that write the pieces without building the object. */
void vs_data_header(uint8_t header[VS_HEADER_SIZE], uint32_t payload_len, uint32_t payload_crc);

/* ---- versioned_format.c: values ---------------------------------------------------------------- */

/** Bytes of the block table stored after a value of len bytes (0 for one block). */
uint64_t vs_value_table_size(uint64_t len);
/** Appends a value and its table to out; *crc gets the reference's crc. */
int vs_value_append(nds_buf *out, const uint8_t *data, size_t len, uint32_t *crc);
/** The block table of a value (table: vs_value_table_size(len) bytes, unused for one block) and
 *  the reference's crc, without copying the value. */
void vs_value_table(const uint8_t *data, size_t len, uint8_t *table, uint32_t *crc);
/** Checks a whole stored value: stored[0..len) the value, then its table (vs_value_table_size).
 *  @return 0 or NDS_ECORRUPT naming where */
int vs_value_verify(const uint8_t *stored, uint64_t len, uint32_t crc, const char *where);
/** Checks the table of a value (table[0..vs_value_table_size(len)) against crc.
 *  @return 0 or NDS_ECORRUPT */
int vs_value_table_verify(const uint8_t *table, uint64_t len, uint32_t crc, const char *where);
/** Checks blocks first..first+count-1 of a value of len bytes, given bytes (the blocks back to
 *  back, the last possibly short) and its verified table (NULL for a one-block value, whose crc
 *  is checked instead). @return 0 or NDS_ECORRUPT */
int vs_value_blocks_verify(const uint8_t *bytes, uint64_t len, uint64_t first, uint64_t count,
                           const uint8_t *table, uint32_t crc, const char *where);

/* ---- versioned_format.c: nodes ------------------------------------------------------------------- */

/** The encoded payload size of n. */
size_t vs_node_payload_size(const vs_node *n);
/** Appends n's envelope to out; *len gets the envelope's length and *crc its payload crc. Keys
 *  must be strictly increasing (NDS_EINVAL otherwise). */
int vs_node_encode(const vs_node *n, nds_buf *out, size_t *len, uint32_t *crc);
/**
 * Decodes the node envelope p[0..n): envelope checks, crc equal to expect_crc, level equal to
 * want_level (or any when want_level > VS_MAX_LEVEL), items within the payload, keys at most
 * VS_KEY_MAX, without NUL and strictly increasing, inline values at most VS_INLINE_MAX.
 * @return 0 or NDS_ECORRUPT naming where; NDS_ENOMEM
 */
int vs_node_decode(const uint8_t *p, size_t n, uint32_t expect_crc, unsigned want_level,
                   const char *where, vs_node **out);
/** A deep copy of e into out. @return 0 or NDS_ENOMEM */
int vs_entry_copy(vs_entry *out, const vs_entry *e);
void vs_entry_dispose(vs_entry *e);
void vs_node_free(vs_node *n);

/* ---- versioned_format.c: commits, tags, superseded lists ---------------------------------------- */

typedef enum vs_object_kind { VS_OBJECT_DATA = 0, VS_OBJECT_INDEX = 1 } vs_object_kind;

/** An object a commit created, with how many items (values, or nodes and lists) it holds. */
typedef struct vs_object_count {
    vs_id object;
    vs_object_kind kind;
    uint64_t items;
} vs_object_count;

/** One version's commit object. The payload is JSON (docs/versioned-format.md). */
typedef struct vs_commit {
    uint64_t version;       /**< >= 1 */
    uint64_t parent;        /**< version - 1 */
    int64_t time_ns;        /**< wall clock of the writer, ns since the epoch */
    char *message;          /**< owned, may be NULL */
    char *metadata;         /**< owned JSON text of an object, may be NULL */
    vs_root root;
    vs_object_count *objects; /**< owned: the data and index objects this commit created */
    size_t nobjects;
    bool has_superseded;
    vs_ref superseded;      /**< an 'S' envelope in one of this commit's index objects */
    vs_id *tokens;          /**< owned: the prepared sets this commit published (may be NULL) */
    size_t ntokens;
} vs_commit;

int vs_commit_encode(const vs_commit *c, nds_buf *out);
/** Decodes a commit envelope; its version must be expect_version. @return 0 or NDS_ECORRUPT */
int vs_commit_decode(const uint8_t *p, size_t n, uint64_t expect_version, const char *where,
                     vs_commit *out);
void vs_commit_dispose(vs_commit *c);

/** What one version stopped referencing, per object (for garbage collection). */
typedef struct vs_superseded {
    vs_id object;
    vs_object_kind kind;
    uint64_t items;
} vs_superseded;

int vs_superseded_encode(const vs_superseded *s, size_t n, nds_buf *out, size_t *len,
                         uint32_t *crc);
int vs_superseded_decode(const uint8_t *p, size_t n, uint32_t expect_crc, const char *where,
                         vs_superseded **out, size_t *count);

/** A tag: the version it names (tags never move). */
int vs_tag_encode(uint64_t version, int64_t time_ns, nds_buf *out);
int vs_tag_decode(const uint8_t *p, size_t n, const char *where, uint64_t *version);
/** 1 when name is a valid tag name ([A-Za-z0-9._-]{1,128}, not all digits, not "latest"). */
bool vs_tag_name_valid(const char *name);

/** One change of a prepared set: a put (value in a data object) or a delete, under a condition. */
typedef struct vs_prepared_op {
    char *key;               /**< owned */
    bool is_delete;
    nds_generation if_equal; /**< NONE, ABSENT or "v<N>" */
    vs_ref value;            /**< puts: where the value is */
} vs_prepared_op;

/** A value a prepared set keeps for its committer only (never committed as a key). */
typedef struct vs_prepared_side {
    char *name; /**< owned */
    vs_ref value;
} vs_prepared_side;

/** A prepared set ('P' envelope, JSON payload: docs/versioned-format.md "Prepared sets"). */
typedef struct vs_prepared {
    uint64_t base_version; /**< the version the preparer saw: no commit before it can hold it */
    int64_t time_ns;
    vs_prepared_op *ops;
    size_t nops;
    vs_prepared_side *side;
    size_t nside;
    vs_object_count *objects; /**< the data objects the prepare wrote */
    size_t nobjects;
} vs_prepared;

int vs_prepared_encode(const vs_prepared *p, nds_buf *out);
int vs_prepared_decode(const uint8_t *p, size_t n, const char *where, vs_prepared *out);
void vs_prepared_dispose(vs_prepared *p);

/* ---- versioned_tree.c ---------------------------------------------------------------------------- */

/** How the tree reaches its nodes. */
typedef struct vs_tree_io {
    /** Loads the node ref points to, checked to have the given level. Valid until released. */
    int (*load)(void *ctx, const vs_ref *ref, unsigned level, const vs_node **node);
    void (*release)(void *ctx, const vs_node *node);
    /** Stores a new node (children are stored before their parent); *ref gets where it is. */
    int (*store)(void *ctx, const vs_node *node, vs_ref *ref);
    /** Told of each node (is_node) and each non-inline value the new tree no longer references.
     *  May be NULL. */
    void (*superseded)(void *ctx, const vs_ref *ref, bool is_node);
    void *ctx;
} vs_tree_io;

/** One change of a batch: a delete, or an entry to put (its key must equal key). */
typedef struct vs_op {
    const char *key;
    bool is_delete;
    const vs_entry *entry; /**< borrowed; copied into new nodes */
} vs_op;

/** Finds key; *found says whether it exists; out (when found) gets a deep copy. */
int vs_tree_lookup(const vs_tree_io *io, const vs_root *root, const char *key, vs_entry *out,
                   bool *found);

typedef int (*vs_entry_fn)(void *ctx, const vs_entry *e);
/** Calls fn for every key k with begin <= k < end ("" end: no bound), in key order, reading only
 *  the nodes that can hold such keys. A non-zero return of fn stops and is returned. */
int vs_tree_list(const vs_tree_io *io, const vs_root *root, const char *begin, const char *end,
                 vs_entry_fn fn, void *ctx);
/**
 * Applies ops (keys strictly increasing; NDS_EINVAL otherwise) to root, storing the new nodes with
 * io->store (only nodes on the paths to changed keys are new; the rest are shared) and reporting what
 * the new tree drops with io->superseded. Deleting a missing key changes nothing. Nodes split at
 * VS_NODE_TARGET; empty nodes vanish; a root with one child is replaced by the child.
 */
int vs_tree_apply(const vs_tree_io *io, const vs_root *root, const vs_op *ops, size_t n,
                  vs_root *out);

/**
 * Called by vs_tree_diff for each key whose entry differs: old_e NULL when the key was added in b,
 * new_e NULL when it was removed, both when its version (generation) changed. Entries are valid
 * during the call only. A non-zero return stops the diff and is returned.
 */
typedef int (*vs_diff_fn)(void *ctx, const char *key, const vs_entry *old_e, const vs_entry *new_e);
/**
 * Calls fn for every key whose entry differs between the trees a and b (any two versions: either
 * order, empty roots, different heights), in key order. Subtrees both trees reference (same object
 * and offset) are skipped unread, so copy-on-write versions cost the nodes on the paths to the
 * changed keys plus the roots, not their size. An entry rewritten with equal bytes is a change (its
 * version differs). @return 0, fn's non-zero return, or a load error
 */
int vs_tree_diff(const vs_tree_io *io, const vs_root *a, const vs_root *b, vs_diff_fn fn,
                 void *ctx);
/** vs_tree_diff restricted to keys k with begin <= k < end ("" end: no bound). */
int vs_tree_diff_range(const vs_tree_io *io, const vs_root *a, const vs_root *b,
                       const char *begin, const char *end, vs_diff_fn fn, void *ctx);


/* ---- versioned_gc_state.c: garbage collection state (docs/versioned-format.md "GC state") ------- */

#define VS_KIND_GC_STATE 'G'
#define VS_GC_STATE_PREFIX "gc/state/"
/* gc/superseded/<version, 20 digits>: a copy of a version's superseded list ('S' envelope) kept
 * when gc deletes the index object that held it. */
#define VS_GC_SUPERSEDED_PREFIX "gc/superseded/"
/* gc/done/<seq, 20 digits>: empty; run seq finished its deletions. */
#define VS_GC_DONE_PREFIX "gc/done/"
/* Orphan kinds: the object prefixes a gc run lists. */
typedef enum vs_gc_orphan_kind {
    VS_GC_ORPHAN_DATA = 0,
    VS_GC_ORPHAN_INDEX = 1,
    VS_GC_ORPHAN_PREPARED = 2
} vs_gc_orphan_kind;
/* State flags. */
#define VS_GC_STATE_FULL_SCAN 1u

/** An object some commit listed, with what the history says of it. It is referenced by exactly the
 *  versions [created, dead_at) (dead_at 0: still referenced by the state's version). */
typedef struct vs_gc_object {
    vs_id id;
    vs_object_kind kind;
    uint64_t created;   /**< the first version that lists it */
    uint64_t dead_at;   /**< the version that superseded its last item, or 0 */
    uint64_t total;     /**< items the commits listing it made reachable */
    uint64_t superseded;/**< items later versions stopped referencing */
    int64_t max_time_ns;/**< the newest commit time among the versions that reference it (up to
                             the state's version while it is live); INT64_MIN when none known */
    int64_t dead_time_ns; /**< commit time of dead_at (0 while live) */
    uint64_t size;      /**< bytes, or UINT64_MAX when no listing has shown it */
} vs_gc_object;

/** An object no commit lists (a killed writer's, a lost race's, a prepared set). */
typedef struct vs_gc_orphan {
    vs_id id;
    vs_gc_orphan_kind kind;
    int64_t first_seen_ns; /**< the collector's clock when a run first listed it */
    uint64_t size;         /**< bytes as listed, or UINT64_MAX */
} vs_gc_orphan;

/** Versions first..last (inclusive) whose objects a gc run deleted: they can no longer be read. */
typedef struct vs_gc_range {
    uint64_t first, last;
} vs_gc_range;

/** What a gc run leaves for the next ("gc/state/<seq>", one 'G' envelope, binary payload). */
typedef struct vs_gc_state {
    uint64_t seq;       /**< >= 1; run k + 1 writes seq k + 1 create-only */
    uint64_t version;   /**< the history is processed up to here (0: none) */
    int64_t time_ns;    /**< the run's clock when it began (its listing starts after this) */
    uint32_t flags;     /**< VS_GC_STATE_FULL_SCAN */
    vs_gc_range *collected; /**< sorted, disjoint, not adjacent, within [1, version] */
    size_t ncollected;
    vs_gc_object *objects;  /**< tracked objects (created <= version) */
    size_t nobjects;
    vs_gc_object *deleting; /**< objects this run deletes (the next run finishes a killed run) */
    size_t ndeleting;
    vs_gc_orphan *pending;  /**< orphans waiting for the grace period */
    size_t npending;
    vs_gc_orphan *doomed;   /**< orphans this run deletes */
    size_t ndoomed;
} vs_gc_state;

/** "gc/state/" + seq as 20 decimal digits. */
void vs_gc_state_key(uint64_t seq, char out[VS_OBJECT_KEY_MAX]);
/** Parses a key made by vs_gc_state_key. @return 0 or -1 */
int vs_gc_state_key_parse(const char *key, uint64_t *seq);
/** Encodes s as one envelope (NDS_EINVAL for a state the decoder would refuse). */
int vs_gc_state_encode(const vs_gc_state *s, nds_buf *out);
/**
 * Decodes a state envelope whose seq must be expect_seq (0: any): envelope checks, records within
 * the payload, kinds known, versions consistent (1 <= created <= version, dead_at 0 or in
 * (created, version]), collected ranges sorted and merged, nothing after the last record.
 * The encoding is canonical: what decodes re-encodes to the same bytes.
 * @return 0 or NDS_ECORRUPT naming where; NDS_ENOMEM
 */
int vs_gc_state_decode(const uint8_t *p, size_t n, uint64_t expect_seq, const char *where,
                       vs_gc_state *out);
void vs_gc_state_dispose(vs_gc_state *s);
/** 1 when version v lies in one of s's collected ranges. */
bool vs_gc_state_collected(const vs_gc_state *s, uint64_t v);

#endif
