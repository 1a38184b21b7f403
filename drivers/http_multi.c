/* The shared HTTP layer (http_multi.h): libcurl's multi interface driven by one I/O thread per
 * client.
 *
 * Callers hand transfers to the I/O thread through a queue and sleep on a condition variable until
 * their batch is done. The I/O thread alone touches the multi handle and the easy handles (libcurl
 * handles are not thread-safe; curl_multi_wakeup is the one call other threads make). At most
 * max_concurrency transfers are on the wire at once; the rest wait in FIFO order. Connections and
 * DNS results live in the multi handle's caches, so every request of a client reuses the same pool
 * of keep-alive connections.
 *
 * Retries: a finished transfer that nds_http_retryable() flags (no response, 429, 5xx but 501) goes
 * to a delay list with a full-jitter exponential backoff (uniform in [0, min(max, base * 2^n)], or
 * the server's Retry-After when it says more) and re-enters the queue when due, so a backoff never
 * holds a connection or another caller's transfer. Bodies are re-sent from the caller's buffer on
 * each try.
 *
 * Bounds: a body past the request's limit (or a Content-Length announcing one) fails the try with
 * NDS_ELIMIT before it is read; an error status keeps at most NDS_HTTP_ERROR_BODY_MAX bytes of its
 * body (enough for the server's message); a header block past NDS_HTTP_HEADER_MAX fails. A try
 * that moves less than one byte a second for the stall time is cut (CURLOPT_LOW_SPEED_*), and every
 * try's timeout is capped by what is left of the operation's deadline, which also stops retries: a
 * dead server fails within the deadline, with a message naming the URL, the tries, the time spent
 * and why each retry happened.
 *
 * Omits: redirects (an S3 301/307 is an error to report, not to follow), content decoding (byte
 * ranges and ETags must describe the stored bytes), HTTP proxies configured by the caller
 * (libcurl's own environment variables still apply).
 *
 * Threading: any thread may call nds_http_perform / nds_http_perform_many at once. Lock order: the
 * client's mutex is a leaf (never held across a libcurl call that may run a callback of ours,
 * except the I/O thread's own header/body callbacks, which touch only their transfer). Ownership:
 * requests are borrowed for the call; a response owns its body and header block.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curl_loader.h"

#include "http_multi.h"
#include "internal/error.h"
#include "internal/util.h"

#define DEFAULT_CONCURRENCY 32
#define DEFAULT_TIMEOUT_MS 60000L
#define CONNECT_TIMEOUT_MS 10000L
#define IDLE_POLL_MS 1000

typedef struct batch {
    size_t remaining;    /* transfers not yet finished; guarded by the client's mutex */
    pthread_cond_t done; /* signalled when remaining reaches 0 */
} batch;

/* One request in flight (queued, on the wire, or waiting for its retry). */
typedef struct xfer {
    const nds_http_request *req; /* borrowed from the caller */
    nds_http_response *resp;     /* caller's; filled by the I/O thread */
    int *rc;                     /* caller's; set when done */
    nds_http_retry policy;       /* max_attempts 1 when the caller passed none */
    batch *batch;
    CURL *easy; /* created by the I/O thread on first start */
    struct curl_slist *hdrs;
    size_t upload_off; /* read position in req->body */
    uint64_t due_ns;   /* when a delayed retry may start */
    nds_buf hdr_buf;   /* header block being received */
    uint64_t max_body; /* the body limit of this request (the client's or the request's) */
    bool own_limit;    /* max_body is the request's, smaller than the client's */
    bool limit_hit;    /* the body outgrew max_body (or Content-Length announced it would) */
    bool headers_hit;  /* the header block outgrew NDS_HTTP_HEADER_MAX */
    bool nobody;       /* HEAD: Content-Length describes the object, not a body */
    bool deadline_hit; /* a retry was due after the deadline */
    uint64_t announced;            /* Content-Length of a refused body, or 0 */
    uint64_t start_ns, end_ns;     /* first try started, transfer finished */
    uint64_t deadline_ns;          /* start_ns + the deadline */
    nds_http_limits limits;        /* the client's, copied at the first try */
    char errbuf[CURL_ERROR_SIZE];
    struct xfer *next;
} xfer;

struct nds_http_client {
    pthread_mutex_t mu; /* guards everything below but multi (I/O thread only) */
    pthread_t thread;
    CURLM *multi;
    int max_concurrency;
    int active;               /* transfers added to multi */
    xfer *queue, *queue_tail; /* waiting to start, FIFO */
    xfer *delayed;            /* waiting for a retry, unordered */
    nds_http_limits limits;   /* bounds of every request */
    bool stop;
};


/* ---- helpers ---- */

static bool ci_prefix(const char *s, size_t n, const char *prefix) {
    size_t m = strlen(prefix);
    return n >= m && strncasecmp(s, prefix, m) == 0;
}

bool nds_http_header(const nds_http_response *resp, const char *name, char *buf, size_t cap) {
    const char *p = resp->headers;
    size_t nlen = strlen(name);
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
            const char *v = p + nlen + 1, *end = p + len;
            while (v < end && (*v == ' ' || *v == '\t')) v++;
            while (end > v && isspace((unsigned char)end[-1])) end--;
            if (cap > 0) {
                size_t n = (size_t)(end - v) < cap - 1 ? (size_t)(end - v) : cap - 1;
                memcpy(buf, v, n);
                buf[n] = '\0';
            }
            return true;
        }
        p = eol ? eol + 1 : NULL;
    }
    return false;
}

void nds_http_response_dispose(nds_http_response *resp) {
    if (!resp) return;
    nds_buf_dispose(&resp->body);
    free(resp->headers);
    memset(resp, 0, sizeof *resp);
}

char *nds_http_escape(const char *s, bool keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    if (n > (SIZE_MAX - 1) / 3) return NULL;
    char *out = malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
            (keep_slash && *p == '/')) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

/* Transport failures worth another try; the rest (bad URL, TLS verification, our own size limit)
 * would fail the same way again. */
static bool curl_code_retryable(int code) {
    switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_AGAIN:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_READ_ERROR: return true;
    default: return false;
    }
}

bool nds_http_retryable(const nds_http_response *resp) {
    if (resp->curl_code != 0) return curl_code_retryable(resp->curl_code);
    return resp->status == 429 || (resp->status >= 500 && resp->status != 501) || resp->status == 0;
}

/* ---- libcurl callbacks (I/O thread) ---- */

static long status_so_far(const xfer *x) {
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/* Returning less than len aborts the transfer (CURLE_WRITE_ERROR); the flags say why. An error
 * status's body is only the server's message: its first NDS_HTTP_ERROR_BODY_MAX bytes are kept and
 * the answer counts as received. */
static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = size * n;
    nds_buf *b = &x->resp->body;
    if (status_so_far(x) >= 300) {
        size_t room = b->len < NDS_HTTP_ERROR_BODY_MAX ? NDS_HTTP_ERROR_BODY_MAX - b->len : 0;
        if (len <= room) return nds_buf_append(b, p, len) == 0 ? len : 0;
        if (nds_buf_append(b, p, room) == 0) x->resp->body_cut = true;
        return 0;
    }
    if ((uint64_t)b->len + len > x->max_body) {
        x->limit_hit = true;
        return 0;
    }
    return nds_buf_append(b, p, len) == 0 ? len : 0;
}

/* A successful answer whose Content-Length exceeds the limit fails before its body is read. */
static bool announces_too_much(xfer *x, const char *p, size_t len) {
    if (x->nobody || !ci_prefix(p, len, "content-length:")) return false;
    long status = status_so_far(x);
    if (status < 200 || status >= 300) return false;
    char v[32];
    size_t off = 15;
    while (off < len && (p[off] == ' ' || p[off] == '\t')) off++;
    snprintf(v, sizeof v, "%.*s", (int)(len - off < 31 ? len - off : 31), p + off);
    errno = 0;
    unsigned long long cl = strtoull(v, NULL, 10);
    if (errno == ERANGE) cl = ULLONG_MAX;
    if ((uint64_t)cl <= x->max_body) return false;
    x->announced = (uint64_t)cl;
    return x->limit_hit = true;
}

/* Keeps only the last response's header block: an interim "100 Continue" starts a new one. */
static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = size * n;
    if (ci_prefix(p, len, "HTTP/")) x->hdr_buf.len = 0;
    if (x->hdr_buf.len + len > NDS_HTTP_HEADER_MAX) {
        x->headers_hit = true;
        return 0;
    }
    if (announces_too_much(x, p, len)) return 0;
    return nds_buf_append(&x->hdr_buf, p, len) == 0 ? len : 0;
}

static size_t on_read(char *dst, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t left = x->req->body_len - x->upload_off, len = size * n;
    if (len > left) len = left;
    if (len) memcpy(dst, x->req->body + x->upload_off, len);
    x->upload_off += len;
    return len;
}

static int on_seek(void *ud, curl_off_t off, int origin) {
    xfer *x = ud;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > x->req->body_len)
        return CURL_SEEKFUNC_FAIL;
    x->upload_off = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

/* ---- transfer setup (I/O thread) ---- */

static int set_method(xfer *x) {
    const nds_http_request *r = x->req;
    CURL *e = x->easy;
    const char *m = r->method ? r->method : "GET";
    if (strcmp(m, "GET") == 0) return curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    if (strcmp(m, "HEAD") == 0) {
        x->nobody = true;
        return curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    }
    if (strcmp(m, "PUT") == 0) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(e, CURLOPT_READDATA, x);
        curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(e, CURLOPT_SEEKDATA, x);
        return curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
    }
    if (strcmp(m, "POST") != 0) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
    if (strcmp(m, "POST") == 0 || r->body) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
        return curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
    }
    return CURLE_OK;
}

static int set_headers(xfer *x) {
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
    /* No "Expect: 100-continue": a server that ignores it costs a one-second stall per upload. */
    struct curl_slist *l = curl_slist_append(NULL, "Expect:");
    for (size_t i = 0; l && i < x->req->nheaders; i++) {
        struct curl_slist *t = curl_slist_append(l, x->req->headers[i]);
        if (!t) {
            curl_slist_free_all(l);
            l = NULL;
        } else {
            l = t;
        }
    }
    if (!l) return CURLE_OUT_OF_MEMORY;
    x->hdrs = l;
    return curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, l);
}

/* At the first try: the body limit and the deadline of the operation. Unless given explicitly, the
 * deadline is at least one try's timeout (a caller that allows a long try allows one). */
static void start_operation(xfer *x, const nds_http_limits *l) {
    x->limits = *l;
    uint64_t req_max = x->req->max_response_bytes;
    x->own_limit = req_max > 0 && req_max < l->max_response_bytes;
    x->max_body = x->own_limit ? req_max : l->max_response_bytes;
    long deadline = l->deadline_ms;
    if (!l->deadline_given && x->req->timeout_ms > deadline) deadline = x->req->timeout_ms;
    x->start_ns = nds_now_ns();
    x->deadline_ns = x->start_ns + (uint64_t)deadline * 1000000u;
}

/* Prepares x's easy handle for one attempt. @return a CURLcode */
static int setup_attempt(xfer *x, const nds_http_limits *l) {
    if (!x->easy && !(x->easy = curl_easy_init())) return CURLE_OUT_OF_MEMORY;
    if (x->resp->attempts == 0) start_operation(x, l);
    CURL *e = x->easy;
    curl_easy_reset(e);
    x->upload_off = 0;
    x->limit_hit = x->headers_hit = false;
    x->announced = 0;
    x->hdr_buf.len = 0;
    x->resp->body.len = 0;
    x->resp->body_cut = false;
    x->errbuf[0] = '\0';
    long timeout = x->req->timeout_ms > 0 ? x->req->timeout_ms : DEFAULT_TIMEOUT_MS;
    uint64_t now = nds_now_ns();
    long left = now < x->deadline_ns ? (long)((x->deadline_ns - now) / 1000000u) : 0;
    if (left < timeout) timeout = left > 0 ? left : 1; /* no try outlives the deadline */
    curl_easy_setopt(e, CURLOPT_URL, x->req->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    /* keys may hold "." and ".." segments: send them as they are (the signature covers them) */
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     timeout < CONNECT_TIMEOUT_MS ? timeout : CONNECT_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    /* a stalled server: under 1 byte/s for the stall time ends the try (it may be retried) */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (x->limits.stall_ms + 999) / 1000);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    int rc = set_method(x);
    return rc ? rc : set_headers(x);
}

/* ---- completion (I/O thread, client mutex held) ---- */

/* The backoff before try number `attempt` + 1 (attempt >= 1), in ns: full jitter, or Retry-After.
 */
static uint64_t backoff_ns(const xfer *x, int attempt) {
    long base = x->policy.base_delay_ms > 0 ? x->policy.base_delay_ms : 1;
    long cap = x->policy.max_delay_ms > 0 ? x->policy.max_delay_ms : base;
    uint64_t ceiling = (uint64_t)base << (attempt - 1 < 20 ? attempt - 1 : 20);
    if (ceiling > (uint64_t)cap) ceiling = (uint64_t)cap;
    uint64_t ms = nds_random_u64() % (ceiling + 1);
    char ra[32];
    if ((x->resp->status == 429 || x->resp->status == 503) &&
        nds_http_header(x->resp, "retry-after", ra, sizeof ra)) {
        long secs = strtol(ra, NULL, 10); /* an HTTP-date form is ignored: the jitter stands */
        if (secs > 0 && (uint64_t)secs * 1000 > ms)
            ms = (uint64_t)secs * 1000 < (uint64_t)cap ? (uint64_t)secs * 1000 : (uint64_t)cap;
    }
    return ms * 1000000ull;
}

static void finish_batch_member(xfer *x, int rc) {
    *x->rc = rc;
    x->end_ns = nds_now_ns();
    if (--x->batch->remaining == 0) pthread_cond_broadcast(&x->batch->done);
}

/* Appends why try number r->attempts is retried to r->retries (bounded). */
static void note_retry(xfer *x) {
    nds_http_response *r = x->resp;
    char why[96];
    if (r->curl_code == 0)
        snprintf(why, sizeof why, "HTTP %ld", r->status);
    else
        snprintf(why, sizeof why, "%.90s",
                 x->errbuf[0] ? x->errbuf : curl_easy_strerror((CURLcode)r->curl_code));
    size_t used = strlen(r->retries);
    if (used + 8 < sizeof r->retries)
        snprintf(r->retries + used, sizeof r->retries - used, "%stry %d: %s", used ? "; " : "",
                 r->attempts, why);
}

/* Records the outcome of one attempt; schedules a retry or completes the transfer. */
static void on_done(nds_http_client *c, xfer *x, CURLcode code) {
    nds_http_response *r = x->resp;
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    if (code == CURLE_WRITE_ERROR && r->body_cut) code = CURLE_OK; /* an error body, cut short */
    r->status = status;
    r->curl_code = (int)code;
    r->attempts++;
    free(r->headers);
    r->headers = malloc(x->hdr_buf.len + 1);
    if (r->headers) {
        memcpy(r->headers, x->hdr_buf.data ? (const char *)x->hdr_buf.data : "", x->hdr_buf.len);
        r->headers[x->hdr_buf.len] = '\0';
    }
    if (!x->limit_hit && !x->headers_hit && r->attempts < x->policy.max_attempts &&
        nds_http_retryable(r)) {
        uint64_t due = nds_now_ns() + backoff_ns(x, r->attempts);
        if (due < x->deadline_ns) {
            note_retry(x);
            x->due_ns = due;
            x->next = c->delayed;
            c->delayed = x;
            return;
        }
        x->deadline_hit = r->deadline_hit = true;
    }
    int rc = 0;
    if (x->limit_hit || x->headers_hit)
        rc = NDS_ELIMIT;
    else if (!r->headers)
        rc = NDS_ENOMEM;
    else if (code == CURLE_OPERATION_TIMEDOUT)
        rc = NDS_ETIMEOUT;
    else if (code != CURLE_OK)
        rc = NDS_ENETWORK;
    finish_batch_member(x, rc);
}

/* Moves due retries to the queue; returns the ms until the next one is due (capped). */
static long promote_delayed(nds_http_client *c) {
    uint64_t now = nds_now_ns(), next = UINT64_MAX;
    for (xfer **p = &c->delayed; *p;) {
        xfer *x = *p;
        if (x->due_ns <= now) {
            *p = x->next;
            x->next = NULL;
            if (c->queue_tail)
                c->queue_tail->next = x;
            else
                c->queue = x;
            c->queue_tail = x;
        } else {
            if (x->due_ns < next) next = x->due_ns;
            p = &x->next;
        }
    }
    if (next == UINT64_MAX) return IDLE_POLL_MS;
    uint64_t ms = (next - now) / 1000000u + 1;
    return ms < IDLE_POLL_MS ? (long)ms : IDLE_POLL_MS;
}

/* Starts queued transfers while under the concurrency limit. A transfer that cannot even be set up
 * fails at once (without retries: the same setup would fail again). */
static void start_queued(nds_http_client *c) {
    while (c->queue && c->active < c->max_concurrency) {
        xfer *x = c->queue;
        c->queue = x->next;
        if (!c->queue) c->queue_tail = NULL;
        x->next = NULL;
        int code = setup_attempt(x, &c->limits);
        if (code == CURLE_OK && curl_multi_add_handle(c->multi, x->easy) == CURLM_OK) {
            c->active++;
            continue;
        }
        snprintf(x->errbuf, sizeof x->errbuf, "cannot set up the transfer (%s)",
                 curl_easy_strerror(code ? (CURLcode)code : CURLE_FAILED_INIT));
        x->resp->curl_code = code ? code : CURLE_FAILED_INIT;
        x->resp->attempts++;
        finish_batch_member(x, code == CURLE_OUT_OF_MEMORY ? NDS_ENOMEM : NDS_ENETWORK);
    }
}

static void *io_thread(void *arg) {
    nds_http_client *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        if (c->stop) {
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        long wait_ms = promote_delayed(c);
        start_queued(c);
        pthread_mutex_unlock(&c->mu);
        int running = 0;
        curl_multi_perform(c->multi, &running);
        CURLMsg *m;
        int left;
        bool finished = false;
        while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE) continue;
            finished = true;
            xfer *x = NULL;
            CURLcode code = m->data.result;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            curl_multi_remove_handle(c->multi, m->easy_handle);
            pthread_mutex_lock(&c->mu);
            c->active--;
            on_done(c, x, code);
            pthread_mutex_unlock(&c->mu);
        }
        /* A finished transfer may have scheduled a retry sooner than wait_ms (computed before it):
         * go round again so promote_delayed computes the wait from the new schedule. */
        if (finished) continue;
        curl_multi_poll(c->multi, NULL, 0, (int)wait_ms, NULL);
    }
}

/* ---- public ---- */

int nds_http_client_new(nds_http_client **out, int max_concurrency) {
    int rc = nds_curl_load();
    if (rc) return rc;
    nds_http_client *c = calloc(1, sizeof *c);
    if (!c) return nds_err(NDS_ENOMEM, "http: out of memory creating a client");
    c->max_concurrency = max_concurrency > 0 ? max_concurrency : DEFAULT_CONCURRENCY;
    c->limits = (nds_http_limits)NDS_HTTP_LIMITS_DEFAULT;
    c->multi = curl_multi_init();
    if (!c->multi) {
        free(c);
        return nds_err(NDS_ENOMEM, "http: out of memory creating a client");
    }
    /* Keep as many idle connections as may be busy at once, so a burst reuses them all. */
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)c->max_concurrency);
    pthread_mutex_init(&c->mu, NULL);
    int err = pthread_create(&c->thread, NULL, io_thread, c);
    if (err != 0) {
        curl_multi_cleanup(c->multi);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return nds_err_errno(err, "http: cannot start the i/o thread");
    }
    *out = c;
    return 0;
}

void nds_http_client_free(nds_http_client *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_mutex_unlock(&c->mu);
    curl_multi_wakeup(c->multi);
    pthread_join(c->thread, NULL);
    curl_multi_cleanup(c->multi);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The URL without its query (which may carry signatures or tokens), for messages. */
static void url_for_message(const char *url, char *buf, size_t cap) {
    size_t n = strcspn(url, "?");
    snprintf(buf, cap, "%.*s", (int)(n < 400 ? n : 400), url);
}

/* The error of a body or header block past its limit. */
static int limit_error(const xfer *x, const char *method, const char *u) {
    const char *pre = x->limits.member_prefix;
    if (x->headers_hit)
        return nds_err(NDS_ELIMIT, "http: %s %s: response headers larger than %u bytes", method, u,
                       NDS_HTTP_HEADER_MAX);
    char announced[64] = "", hint[160];
    if (x->announced)
        snprintf(announced, sizeof announced, " (Content-Length: %llu)",
                 (unsigned long long)x->announced);
    if (x->own_limit)
        snprintf(hint, sizeof hint, "the limit of this request");
    else
        snprintf(hint, sizeof hint,
                 "raise it with spec member \"%smax_response_bytes\" or "
                 "NDS_HTTP_MAX_RESPONSE_BYTES",
                 pre);
    return nds_err(NDS_ELIMIT, "http: %s %s: response body larger than %llu bytes%s (%s)", method,
                   u, (unsigned long long)x->max_body, announced, hint);
}

/* Sets the calling thread's error for a transfer that got no response: what the last try met, the
 * tries and the time spent, the deadline when it stopped them, and why each retry happened. */
static int transport_error(const xfer *x, int rc) {
    char u[420], extra[200] = "";
    const char *method = x->req->method ? x->req->method : "GET";
    const char *pre = x->limits.member_prefix;
    url_for_message(x->req->url, u, sizeof u);
    const char *what = x->errbuf[0] ? x->errbuf : curl_easy_strerror((CURLcode)x->resp->curl_code);
    if (rc == NDS_ELIMIT) return limit_error(x, method, u);
    if (rc == NDS_ENOMEM) return nds_err(rc, "http: %s %s: out of memory", method, u);
    if (strncmp(what, "Operation too slow", 18) == 0)
        snprintf(extra, sizeof extra, ", a stall (spec member \"%sstall_timeout\" or "
                 "NDS_HTTP_STALL_TIMEOUT)", pre);
    if (x->start_ns && (x->deadline_hit || x->end_ns >= x->deadline_ns))
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra),
                 ", stopped by the deadline of %.1f s (spec member \"%srequest_deadline\" or "
                 "NDS_HTTP_DEADLINE)",
                 (double)(x->deadline_ns - x->start_ns) / 1e9, pre);
    const nds_http_response *r = x->resp;
    double secs = x->start_ns ? (double)(x->end_ns - x->start_ns) / 1e9 : 0.0;
    return nds_err_cause(rc, NDS_CAUSE_CURL, r->curl_code,
                         "http: %s %s: %s (after %d attempt%s in %.1f s%s)%s%s", method, u, what,
                         r->attempts, r->attempts == 1 ? "" : "s", secs, extra,
                         r->retries[0] ? "; " : "", r->retries);
}

void nds_http_perform_many(nds_http_client *c, const nds_http_request *reqs,
                           const nds_http_retry *policy, nds_http_response *resps, int *rcs,
                           size_t n) {
    if (n == 0) return;
    xfer *xs = calloc(n, sizeof *xs);
    if (!xs) {
        for (size_t i = 0; i < n; i++) {
            memset(&resps[i], 0, sizeof resps[i]);
            rcs[i] = nds_err(NDS_ENOMEM, "http: out of memory");
        }
        return;
    }
    batch b = {n, PTHREAD_COND_INITIALIZER};
    nds_http_retry none = {1, 0, 0};
    for (size_t i = 0; i < n; i++) {
        memset(&resps[i], 0, sizeof resps[i]);
        xs[i] = (xfer){.req = &reqs[i],
                       .resp = &resps[i],
                       .rc = &rcs[i],
                       .batch = &b,
                       .policy = policy ? *policy : none};
        if (xs[i].policy.max_attempts < 1) xs[i].policy.max_attempts = 1;
        if (i + 1 < n) xs[i].next = &xs[i + 1];
    }
    pthread_mutex_lock(&c->mu);
    if (c->queue_tail)
        c->queue_tail->next = &xs[0];
    else
        c->queue = &xs[0];
    c->queue_tail = &xs[n - 1];
    pthread_mutex_unlock(&c->mu);
    curl_multi_wakeup(c->multi);
    pthread_mutex_lock(&c->mu);
    while (b.remaining > 0) pthread_cond_wait(&b.done, &c->mu);
    pthread_mutex_unlock(&c->mu);
    int first_error = -1;
    for (size_t i = 0; i < n; i++) {
        if (rcs[i] != 0 && first_error < 0) first_error = (int)i;
        if (rcs[i] != 0) { /* no response: nothing for the caller to dispose */
            nds_buf_dispose(&resps[i].body);
            free(resps[i].headers);
            resps[i].headers = NULL;
        }
        if (xs[i].easy) curl_easy_cleanup(xs[i].easy);
        curl_slist_free_all(xs[i].hdrs);
        nds_buf_dispose(&xs[i].hdr_buf);
    }
    if (first_error >= 0) transport_error(&xs[first_error], rcs[first_error]);
    pthread_cond_destroy(&b.done);
    free(xs);
}

int nds_http_perform(nds_http_client *c, const nds_http_request *req, const nds_http_retry *policy,
                     nds_http_response *resp) {
    int rc = 0;
    nds_http_perform_many(c, req, policy, resp, &rc, 1);
    return rc;
}

void nds_http_client_set_limits(nds_http_client *c, const nds_http_limits *l) {
    pthread_mutex_lock(&c->mu);
    c->limits = *l;
    pthread_mutex_unlock(&c->mu);
}
