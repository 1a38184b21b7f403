/* Conditional writes of the s3 driver: what the endpoint can be trusted with, and the lease lock.
 *
 * The probe ("auto", and also "on" / "create_only", which only narrow its choice) runs once per
 * process per endpoint, at the first mutation, on a throw-away key "<key>.__ndstore_probe.<random>"
 * next to the key being written (so it needs no more permission than the write itself):
 *   1. PUT If-None-Match: *            must succeed (501 / 400: create-only unsupported);
 *   2. the same again                  must be refused (412/409) (200: the header is ignored);
 *   3. PUT If-Match: <wrong ETag>      refused = If-Match honoured (200: ignored, 501:
 * unsupported);
 *   4. PUT If-Match: "<ETag>", then bare <ETag> when the quoted form is refused (Ceph RGW wants it
 * bare);
 *   5. DELETE If-Match: <wrong>, then <right>: conditional delete honoured;
 *   6. DELETE (cleanup).
 * Sequential probes cannot show atomicity under races (Ceph RGW passes 3-5 yet lets two racing
 * If-Match writers both win), so "auto" trusts If-Match ("full") only on servers known to apply it
 * atomically (Server: AmazonS3, and the project's strict test double); elsewhere, when create-only
 * works, every mutation of a key runs under a lease; when nothing works, conditional writes are
 * refused.
 *
 * The lease of key K is the object "K.__lock", created with If-None-Match: * and holding the
 * owner's random token and the lease length. Its holder sends mutations only before t0 + 3/4 lease
 * (t0 = its monotonic clock before the create request), so it stops well before anyone may break
 * the lease. A lease is expired when the server's Date minus the lock's Last-Modified (both the
 * server's clock, so no cross-host clock skew) exceeds its length + 2 s. Breaking is exclusive: the
 * breaker must first create the claim "K.__lock.b.<ETag of that lease>" with If-None-Match: *; only
 * the claim's winner deletes K.__lock (the ETag names one lease instance, since the body holds a
 * random token). A claim whose winner died is itself broken the same way (a claim on the claim), up
 * to 3 levels. Claims are left in place (a few bytes per dead writer; delete_range removes them
 * with the data): deleting one could let a breaker that read the old lease long ago win a second
 * claim on it. Remaining risk: a holder whose request is delayed in the network or the server for
 * more than lease/4 + 2 s after it was sent can still land after the lease was broken.
 *
 * Threading: the probe cache is process-wide under one mutex (held while probing, so each endpoint
 * is probed once); leases are per call. Ownership: s3_lease owns lock_key until released.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "curl_loader.h"
#include <json-c/json.h>

#include "s3_internal.h"
#include "s3_xml.h"
#include "internal/error.h"
#include "internal/util.h"

#define LOCK_SUFFIX ".__lock"
#define CLAIM_MARK ".__lock.b."
#define PROBE_MARK ".__ndstore_probe."
#define BREAK_SLACK_MS 2000
#define MAX_CLAIM_DEPTH 3

bool s3_reserved_key(const char *key) {
    size_t n = strlen(key), m = strlen(LOCK_SUFFIX);
    return (n >= m && strcmp(key + n - m, LOCK_SUFFIX) == 0) || strstr(key, CLAIM_MARK) ||
           strstr(key, PROBE_MARK);
}

const char *s3_cond_mode_name(s3_cond_mode m) {
    switch (m) {
    case S3_COND_FULL: return "full";
    case S3_COND_LEASE: return "create_only";
    case S3_COND_NONE: return "none";
    case S3_COND_OFF: return "off";
    default: return "not probed yet";
    }
}

/* ---- probe ---- */

typedef struct probe_result {
    bool create_only_ok, if_match_ok, unquoted, cond_delete_ok, known_atomic;
    char server[80];
    char reason[200];
} probe_result;

typedef struct probe_entry {
    char *endpoint;
    probe_result r;
    struct probe_entry *next;
} probe_entry;

static pthread_mutex_t g_probe_mu = PTHREAD_MUTEX_INITIALIZER;
static probe_entry *g_probes; /* never freed: one small entry per endpoint per process */

static bool refused(long status) { return status == 412 || status == 409; }
static bool ok2xx(long status) { return status >= 200 && status < 300; }

/* One probe request; *status gets the HTTP status. Transport errors and 401/403 are returned. */
static int probe_req(s3_store *s, const char *method, const char *key, const char *hdr,
                     const char *body, long *status, nds_http_response *keep) {
    nds_http_response resp;
    const char *hdrs[1] = {hdr};
    s3_call probe = {method, key, NULL, hdrs, hdr ? 1 : 0, (const uint8_t *)body,
                     body ? strlen(body) : 0};
    int rc = s3_send(s, &probe, NULL, 0, &resp);
    if (rc == 0 && (resp.status == 401 || resp.status == 403))
        rc = s3_status_error(s, &resp, "probe", key);
    if (rc == 0) *status = resp.status;
    if (rc == 0 && keep)
        *keep = resp;
    else
        nds_http_response_dispose(&resp);
    return rc;
}

/* Steps 3-5: what If-Match does (on a key that exists). */
static int probe_if_match(s3_store *s, const char *k, probe_result *r) {
    long st = 0;
    static const char wrong[] = "0123456789abcdef0123456789abcdef";
    char hdr[NDS_GENERATION_MAX + 32];
    snprintf(hdr, sizeof hdr, "If-Match: \"%s\"", wrong);
    int rc = probe_req(s, "PUT", k, hdr, "ndstore probe 3", &st, NULL);
    if (rc || !refused(st)) {
        if (!rc)
            snprintf(r->reason + strlen(r->reason), sizeof r->reason - strlen(r->reason),
                     "; If-Match %s", ok2xx(st) ? "ignored" : "unsupported");
        return rc;
    }
    nds_generation g;
    for (int quoted = 1; rc == 0 && quoted >= 0 && !r->if_match_ok; quoted--) {
        char etag[NDS_GENERATION_MAX];
        if ((rc = s3_head(s, k, &g, NULL, 0))) break;
        s3_gen_etag(&g, etag, sizeof etag);
        snprintf(hdr, sizeof hdr, quoted ? "If-Match: \"%s\"" : "If-Match: %s", etag);
        rc = probe_req(s, "PUT", k, hdr, "ndstore probe 4", &st, NULL);
        if (rc == 0 && ok2xx(st)) r->if_match_ok = true, r->unquoted = !quoted;
    }
    if (rc || !r->if_match_ok) return rc;
    snprintf(hdr, sizeof hdr, r->unquoted ? "If-Match: %s" : "If-Match: \"%s\"", wrong);
    if ((rc = probe_req(s, "DELETE", k, hdr, NULL, &st, NULL)) || !refused(st)) return rc;
    char etag[NDS_GENERATION_MAX];
    if ((rc = s3_head(s, k, &g, NULL, 0))) return rc;
    s3_gen_etag(&g, etag, sizeof etag);
    snprintf(hdr, sizeof hdr, r->unquoted ? "If-Match: %s" : "If-Match: \"%s\"", etag);
    rc = probe_req(s, "DELETE", k, hdr, NULL, &st, NULL);
    r->cond_delete_ok = rc == 0 && ok2xx(st);
    return rc;
}

static void probe_server(const nds_http_response *resp, probe_result *r) {
    if (!nds_http_header(resp, "server", r->server, sizeof r->server)) r->server[0] = '\0';
    r->known_atomic =
        strstr(r->server, "AmazonS3") != NULL || strstr(r->server, "ndstore-strict-s3") != NULL;
}

/* Steps 1-2, then 3-5 when create-only works; always cleans up. */
static int run_probe(s3_store *s, const char *key_hint, probe_result *r) {
    memset(r, 0, sizeof *r);
    char *k =
        nds_asprintf("%s%s%016llx", key_hint, PROBE_MARK, (unsigned long long)nds_random_u64());
    if (!k) return nds_err(NDS_ENOMEM, "s3: out of memory");
    long st1 = 0, st2 = 0;
    nds_http_response first;
    int rc = probe_req(s, "PUT", k, "If-None-Match: *", "ndstore probe 1", &st1, &first);
    if (rc == 0) {
        probe_server(&first, r);
        if (!ok2xx(st1) &&
            st1 != 501) { /* not an answer about conditions: report it, decide nothing */
            rc = s3_status_error(s, &first, "probe PUT", k);
        } else if (!ok2xx(st1)) {
            char code[64], msg[8];
            nds_s3_parse_error((const char *)first.body.data, first.body.len, code, sizeof code,
                               msg, sizeof msg);
            snprintf(r->reason, sizeof r->reason,
                     "create-only PUT (If-None-Match: *) answered HTTP %ld%s%s", st1,
                     code[0] ? " " : "", code);
        }
        nds_http_response_dispose(&first);
    }
    if (rc == 0 && ok2xx(st1))
        rc = probe_req(s, "PUT", k, "If-None-Match: *", "ndstore probe 2", &st2, NULL);
    if (rc == 0 && ok2xx(st1)) {
        r->create_only_ok = refused(st2);
        snprintf(r->reason, sizeof r->reason, "If-None-Match: * %s",
                 r->create_only_ok ? "honoured"
                 : ok2xx(st2)      ? "ignored (an existing key was overwritten)"
                                   : "not honoured");
    }
    if (rc == 0 && r->create_only_ok) rc = probe_if_match(s, k, r);
    long st = 0;
    int crc = probe_req(s, "DELETE", k, NULL, NULL, &st, NULL); /* cleanup, even after a failure */
    free(k);
    return rc ? rc : crc;
}

/* The decision for the requested mode given what the endpoint does. */
static void decide(const s3_store *s, const probe_result *r, s3_cond_decision *d) {
    memset(d, 0, sizeof *d);
    d->etag_unquoted = r->unquoted;
    bool full_ok = r->if_match_ok && r->cond_delete_ok;
    const char *why;
    if (!r->create_only_ok) {
        d->mode = S3_COND_NONE;
        why = "conditional writes refused";
    } else if (s->cond_requested == S3_COND_FULL && full_ok) {
        d->mode = S3_COND_FULL;
        why = "If-Match trusted as the spec asks (\"on\")";
    } else if (s->cond_requested == S3_COND_UNKNOWN && full_ok && r->known_atomic) {
        d->mode = S3_COND_FULL;
        why = "server known to apply If-Match atomically";
    } else {
        d->mode = S3_COND_LEASE;
        why = s->cond_requested == S3_COND_LEASE ? "lease lock as the spec asks (\"create_only\")"
              : full_ok ? "If-Match not known to be atomic on this server: lease lock"
                        : "lease lock";
    }
    snprintf(d->reason, sizeof d->reason, "%.200s%s%s%s; server \"%.80s\"; %s", r->reason,
             r->if_match_ok
                 ? (r->unquoted ? "; If-Match honoured with a bare ETag" : "; If-Match honoured")
                 : "",
             r->if_match_ok ? (r->cond_delete_ok ? ", conditional DELETE honoured"
                                                 : ", conditional DELETE not honoured")
                            : "",
             "", r->server[0] ? r->server : "unnamed", why);
}

/* The cached probe of s's endpoint, probing now when there is none. Called with g_probe_mu held. */
static int probe_cached(s3_store *s, const char *key_hint, probe_result *out) {
    for (probe_entry *e = g_probes; e; e = e->next)
        if (strcmp(e->endpoint, s->scheme_host) == 0) {
            *out = e->r;
            return 0;
        }
    int rc = run_probe(s, key_hint, out);
    if (rc) return nds_err_prefix(rc, "s3: probing conditional writes on %s", s->endpoint);
    probe_entry *e = calloc(1, sizeof *e);
    if (e && (e->endpoint = nds_strdup(s->scheme_host))) {
        e->r = *out;
        e->next = g_probes;
        g_probes = e;
    } else {
        free(e);
    }
    return 0;
}

int s3_cond_decide(s3_store *s, const char *key_hint, s3_cond_decision *out) {
    if (atomic_load(&s->cond_ready)) {
        *out = s->decision;
        return 0;
    }
    int rc = 0;
    pthread_mutex_lock(&s->probe_mu);
    if (!atomic_load(&s->cond_ready)) {
        s3_cond_decision d = {0};
        if (s->cond_requested == S3_COND_OFF) {
            d.mode = S3_COND_OFF;
            snprintf(d.reason, sizeof d.reason,
                     "conditional_writes \"off\": conditions checked by HEAD, not atomic");
        } else {
            probe_result r;
            pthread_mutex_lock(&g_probe_mu);
            rc = probe_cached(s, key_hint, &r);
            pthread_mutex_unlock(&g_probe_mu);
            if (rc == 0) decide(s, &r, &d);
        }
        if (rc == 0) {
            s->decision = d;
            atomic_store(&s->cond_ready, 1);
        }
    }
    if (rc == 0) *out = s->decision;
    pthread_mutex_unlock(&s->probe_mu);
    return rc;
}

/* ---- lease ---- */

long s3_lease_remaining_ms(const s3_lease *l) {
    uint64_t now = nds_now_ns();
    return now >= l->deadline_ns ? 0 : (long)((l->deadline_ns - now) / 1000000u);
}

/* What a GET of a lease (or claim) object showed. */
typedef struct lease_view {
    bool exists, expired;
    nds_generation etag;
    char owner[64];
} lease_view;

/* The owner and lease length from a lease body (defaults when unreadable: never trusted to
 * shorten). */
static void parse_lease_body(const nds_http_response *resp, long def_ms, char *owner, size_t cap,
                             long *lease_ms) {
    *lease_ms = def_ms;
    owner[0] = '\0';
    json_object *o = json_tokener_parse(
        resp->body.data && resp->body.len < 4096 ? (const char *)resp->body.data : "");
    json_object *v;
    if (o && json_object_object_get_ex(o, "owner", &v) && json_object_is_type(v, json_type_string))
        snprintf(owner, cap, "%s", json_object_get_string(v));
    if (o && json_object_object_get_ex(o, "lease_ms", &v) &&
        json_object_is_type(v, json_type_int)) {
        int64_t ms = json_object_get_int64(v);
        if (ms >= 1000 && ms <= 3600000) *lease_ms = (long)ms;
    }
    json_object_put(o);
}

static int lease_inspect(s3_store *s, const char *key, lease_view *v) {
    memset(v, 0, sizeof *v);
    nds_http_response resp;
    int rc = s3_send(s, &(s3_call){.method = "GET", .key = key}, NULL, 0, &resp);
    if (rc == 0 && resp.status == 404) {
        nds_http_response_dispose(&resp);
        return 0;
    }
    if (rc == 0 && resp.status != 200) rc = s3_status_error(s, &resp, "GET", key);
    if (rc == 0 && nds_buf_append(&resp.body, "", 1) != 0)
        rc = nds_err(NDS_ENOMEM, "s3: out of memory");
    if (rc == 0) {
        v->exists = true;
        s3_etag_generation(&resp, &v->etag);
        long lease_ms;
        parse_lease_body(&resp, s->lease_ms, v->owner, sizeof v->owner, &lease_ms);
        char date[80], lm[80];
        if (nds_http_header(&resp, "date", date, sizeof date) &&
            nds_http_header(&resp, "last-modified", lm, sizeof lm)) {
            time_t td = curl_getdate(date, NULL), tl = curl_getdate(lm, NULL);
            v->expired = td > 0 && tl > 0 &&
                         (long long)(td - tl) * 1000 > (long long)lease_ms + BREAK_SLACK_MS;
        } /* without both headers a lease never expires: waiting is safe, breaking blind is not */
    }
    nds_http_response_dispose(&resp);
    return rc;
}

/* Creates key with If-None-Match: * holding body. *won: we created it now or earlier (ambiguous
 * retry). */
static int create_only(s3_store *s, const char *key, const char *body, const char *token,
                       bool *won) {
    nds_http_response resp;
    const char *hdr[1] = {"If-None-Match: *"};
    *won = false;
    s3_call put = {"PUT", key, NULL, hdr, 1, (const uint8_t *)body, strlen(body)};
    int rc = s3_send(s, &put, NULL, 0, &resp);
    if (rc == 0 && ok2xx(resp.status))
        *won = true;
    else if (rc == 0 && !refused(resp.status))
        rc = s3_status_error(s, &resp, "PUT", key);
    /* an earlier try may have landed (libcurl resends by itself on a dead reused connection, so
     * even one attempt seen proves nothing): then the object holds our token */
    bool ambiguous = rc == 0 && !*won;
    nds_http_response_dispose(&resp);
    if (ambiguous) {
        lease_view v;
        rc = lease_inspect(s, key, &v);
        *won = rc == 0 && v.exists && strcmp(v.owner, token) == 0;
    }
    return rc;
}

/* Wins the exclusive right to break the expired object `key` (a lease, or a claim) whose ETag is
 * etag. */
static int claim_break(s3_store *s, const char *key, const char *etag, const char *body,
                       const char *token, int depth, bool *won) {
    *won = false;
    char safe[NDS_GENERATION_MAX];
    size_t j = 0;
    for (const char *p = etag; *p && j + 1 < sizeof safe; p++)
        if ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            *p == '-')
            safe[j++] = *p;
    safe[j] = '\0';
    char *claim = nds_asprintf("%s.b.%s", key, safe);
    if (!claim) return nds_err(NDS_ENOMEM, "s3: out of memory");
    int rc = create_only(s, claim, body, token, won);
    lease_view v;
    if (rc == 0 && !*won && depth < MAX_CLAIM_DEPTH && (rc = lease_inspect(s, claim, &v)) == 0) {
        if (v.exists && strcmp(v.owner, token) == 0)
            *won = true;
        else if (v.exists && v.expired)
            rc = claim_break(s, claim, v.etag.value, body, token, depth + 1, won);
    }
    free(claim);
    return rc;
}

static void lease_backoff(int round) {
    uint64_t ceiling_ms = 5ull << (round < 7 ? round : 7); /* 5 ms .. 640 ms */
    nds_sleep_ns((1 + nds_random_u64() % ceiling_ms) * 1000000ull);
}

/* One look at a held lease: gone (retry now), expired (break it), or live (wait). */
static int lease_contend(s3_store *s, s3_lease *l, const char *body, char *holder, size_t cap,
                         bool *retry_now) {
    lease_view v;
    *retry_now = false;
    int rc = lease_inspect(s, l->lock_key, &v);
    if (rc || !v.exists) {
        *retry_now = rc == 0;
        return rc;
    }
    snprintf(holder, cap, "%s", v.owner[0] ? v.owner : "an unknown owner");
    if (!v.expired) return 0;
    bool won;
    rc = claim_break(s, l->lock_key, v.etag.value, body, l->token, 0, &won);
    if (rc == 0 && won) {
        nds_http_response resp;
        rc = s3_send(s, &(s3_call){.method = "DELETE", .key = l->lock_key}, NULL, 0, &resp);
        if (rc == 0 && resp.status >= 300 && resp.status != 404)
            rc = s3_status_error(s, &resp, "DELETE", l->lock_key);
        nds_http_response_dispose(&resp);
        *retry_now = rc == 0;
    }
    return rc;
}

static char *lease_body(const s3_store *s, const char *token) {
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    for (char *p = host; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 32) *p = '_';
    return nds_asprintf("{\"owner\":\"%s\",\"host\":\"%s\",\"pid\":%d,\"lease_ms\":%ld}\n", token,
                        host, (int)getpid(), s->lease_ms);
}

int s3_lease_acquire(s3_store *s, const char *key, s3_lease *l) {
    memset(l, 0, sizeof *l);
    snprintf(l->token, sizeof l->token, "%016llx%016llx", (unsigned long long)nds_random_u64(),
             (unsigned long long)nds_random_u64());
    l->lock_key = nds_asprintf("%s%s", key, LOCK_SUFFIX);
    char *body = lease_body(s, l->token);
    int rc = l->lock_key && body ? 0 : nds_err(NDS_ENOMEM, "s3: out of memory");
    char holder[64] = "";
    uint64_t start = nds_now_ns();
    for (int round = 0; rc == 0; round++) {
        uint64_t t0 = nds_now_ns();
        bool won, retry_now = false;
        if ((rc = create_only(s, l->lock_key, body, l->token, &won))) break;
        if (won) {
            l->deadline_ns = t0 + (uint64_t)s->lease_ms * 750000u; /* 3/4 of the lease, in ns */
            break;
        }
        if ((rc = lease_contend(s, l, body, holder, sizeof holder, &retry_now))) break;
        if ((nds_now_ns() - start) / 1000000u > (uint64_t)s->lease_wait_ms)
            rc = nds_err(NDS_ETIMEOUT,
                         "s3: write s3://%s/%s: its lease %s is held by %s; gave up after %ld s "
                         "(a lease expires %ld s after its holder stopped renewing it)",
                         s->bucket, key, l->lock_key, holder, s->lease_wait_ms / 1000,
                         s->lease_ms / 1000);
        else if (!retry_now)
            lease_backoff(round);
    }
    free(body);
    if (rc) {
        free(l->lock_key);
        l->lock_key = NULL;
    }
    return rc;
}

void s3_lease_release(s3_store *s, s3_lease *l) {
    long left = s3_lease_remaining_ms(l);
    if (l->lock_key &&
        left > 0) { /* past the deadline the lease may have been broken: not ours to delete */
        nds_http_retry once = {1, 0, 0}; /* a retry could land after the deadline */
        nds_http_response resp;
        s3_call del = {.method = "DELETE", .key = l->lock_key};
        if (s3_send(s, &del, &once, left, &resp) == 0)
            nds_http_response_dispose(&resp);
    }
    free(l->lock_key);
    memset(l, 0, sizeof *l);
}
