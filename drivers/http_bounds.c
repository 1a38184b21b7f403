/* The bounds of the network drivers' HTTP layer (http_multi.h) that are not transfers: the limits'
 * defaults, environment variables and spec members; credential files read without blocking; and the
 * check that a paginated listing moves forward. http_multi.c enforces the limits on each transfer.
 *
 * Threading: all of it runs on the calling thread, on its own data. Ownership: as in http_multi.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http_multi.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

/* ---- bounds: defaults, environment, spec members ---- */

/* "500ms", "1.5s", "2m" or seconds, into milliseconds (at least 1 ms, at most a day). */
static bool parse_duration_text(const char *text, long *out) {
    return nds_duration_ms(text, true, out) && *out >= 1;
}

/* Bytes with an optional binary suffix (k, M, G, T), at least 1 KiB, at most 2^62. */
static bool parse_bytes_text(const char *text, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || errno || *text == '-') return false;
    int shift = 0;
    switch (*end) {
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    case 't':
    case 'T': shift = 40; break;
    case '\0': break;
    default: return false;
    }
    if (*end && end[1] && strcmp(end + 1, "iB") != 0 && strcmp(end + 1, "B") != 0) return false;
    if (v > (1ull << 62) >> shift || (v << shift) < 1024) return false;
    *out = (uint64_t)v << shift;
    return true;
}

int nds_http_limits_init(nds_http_limits *l, const char *member_prefix) {
    *l = (nds_http_limits)NDS_HTTP_LIMITS_DEFAULT;
    snprintf(l->member_prefix, sizeof l->member_prefix, "%s", member_prefix ? member_prefix : "");
    const char *v = getenv("NDS_HTTP_MAX_RESPONSE_BYTES");
    if (v && *v && !parse_bytes_text(v, &l->max_response_bytes))
        return nds_err(NDS_EINVAL,
                       "NDS_HTTP_MAX_RESPONSE_BYTES=\"%.40s\" is not a size like 1048576 or 64M "
                       "(at least 1 KiB)",
                       v);
    v = getenv("NDS_HTTP_DEADLINE");
    if (v && *v) {
        if (!parse_duration_text(v, &l->deadline_ms))
            return nds_err(NDS_EINVAL,
                           "NDS_HTTP_DEADLINE=\"%.40s\" is not a duration like \"30s\" or \"2m\"",
                           v);
        l->deadline_given = true;
    }
    v = getenv("NDS_HTTP_STALL_TIMEOUT");
    if (v && *v && (!parse_duration_text(v, &l->stall_ms) || l->stall_ms < 1000))
        return nds_err(NDS_EINVAL,
                       "NDS_HTTP_STALL_TIMEOUT=\"%.40s\" is not a duration of at least 1 s like "
                       "\"15s\"",
                       v);
    return 0;
}

int nds_http_limits_parse(nds_http_limits *l, const json_object *spec, const char *who) {
    char name[64], doc[80];
    json_object *v;
    snprintf(doc, sizeof doc, "%s spec", who);
    snprintf(name, sizeof name, "%smax_response_bytes", l->member_prefix);
    int64_t bytes = (int64_t)l->max_response_bytes;
    int rc = nds_json_get_int(spec, name, true, 1024, INT64_C(1) << 62, doc, &bytes);
    if (rc == NDS_EFORMAT) { /* a bad spec is NDS_EINVAL, with json_util's message */
        nds_error_saved e;
        nds_error_save(&e, rc);
        e.code = NDS_EINVAL;
        return nds_error_restore(&e);
    }
    if (rc) return rc;
    l->max_response_bytes = (uint64_t)bytes;
    snprintf(name, sizeof name, "%srequest_deadline", l->member_prefix);
    if (json_object_object_get_ex(spec, name, &v)) {
        if ((rc = nds_json_duration_ms(v, who, name, &l->deadline_ms))) return rc;
        if (l->deadline_ms < 1)
            return nds_err(NDS_EINVAL, "%s: spec member \"%s\" must be more than 0", who, name);
        l->deadline_given = true;
    }
    snprintf(name, sizeof name, "%sstall_timeout", l->member_prefix);
    if (json_object_object_get_ex(spec, name, &v)) {
        if ((rc = nds_json_duration_ms(v, who, name, &l->stall_ms))) return rc;
        if (l->stall_ms < 1000)
            return nds_err(NDS_EINVAL, "%s: spec member \"%s\" must be at least 1 s", who, name);
    }
    return 0;
}

/* ---- credential files ---- */

int nds_read_secret_file(const char *path, size_t max, const char *who, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO with no writer must not wait for one */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno == ENOENT ? nds_err(NDS_ENOTFOUND, "%s %s does not exist", who, path)
                               : nds_err_errno(errno, "%s %s", who, path);
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = nds_err_errno(errno, "%s %s", who, path);
    else if (!S_ISREG(st.st_mode))
        rc = nds_err(NDS_EINVAL, "%s %s is not a regular file", who, path);
    else if ((uint64_t)st.st_size > max)
        rc = nds_err(NDS_ELIMIT, "%s %s is larger than %zu bytes", who, path, max);
    else if (!(*text = malloc((size_t)st.st_size + 1)))
        rc = nds_err(NDS_ENOMEM, "%s %s: out of memory", who, path);
    while (rc == 0 && *len < (size_t)st.st_size) { /* a file that shrinks meanwhile ends early */
        ssize_t got = read(fd, *text + *len, (size_t)st.st_size - *len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) rc = nds_err_errno(errno, "%s %s", who, path);
        if (got <= 0) break;
        *len += (size_t)got;
    }
    close(fd);
    if (rc) {
        if (*text) explicit_bzero(*text, *len);
        free(*text);
        *text = NULL;
        *len = 0;
        return rc;
    }
    (*text)[*len] = '\0';
    return 0;
}

/* ---- listings that must progress ---- */

int nds_list_progress_key(nds_list_progress *p, const char *key, const char *what) {
    if (p->last_key && strcmp(key, p->last_key) <= 0)
        return nds_err(NDS_EIO,
                       "%s: the server listed \"%.80s\" after \"%.80s\" (page %ld): keys must come "
                       "in order, and a listing that goes back would never end",
                       what, key, p->last_key, p->pages + 1);
    char *k = nds_strdup(key);
    if (!k) return nds_err(NDS_ENOMEM, "%s: out of memory", what);
    free(p->last_key);
    p->last_key = k;
    return 0;
}

int nds_list_progress_page(nds_list_progress *p, size_t nkeys, const char *next, const char *what) {
    p->pages++;
    if (!next) return 0;
    if (p->last_token && strcmp(next, p->last_token) == 0)
        return nds_err(NDS_EIO,
                       "%s: the server answered page %ld with the continuation token it was asked "
                       "for (\"%.40s\"): the listing would never end",
                       what, p->pages, next);
    p->empty_run = nkeys ? 0 : p->empty_run + 1;
    if (p->empty_run > NDS_LIST_EMPTY_PAGES_MAX)
        return nds_err(NDS_EIO,
                       "%s: %d pages in a row without a key, each with another continuation "
                       "token: the listing does not progress",
                       what, p->empty_run);
    char *t = nds_strdup(next);
    if (!t) return nds_err(NDS_ENOMEM, "%s: out of memory", what);
    free(p->last_token);
    p->last_token = t;
    return 0;
}

void nds_list_progress_dispose(nds_list_progress *p) {
    free(p->last_key);
    free(p->last_token);
    memset(p, 0, sizeof *p);
}
