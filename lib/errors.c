/* Status code texts, the thread-local last error (message + original cause), and the redaction of
 * secrets in URLs that every message goes through before it is stored. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal/error.h"

#define NDS_MESSAGE_MAX 1024

typedef struct error_state {
    nds_error pub;
    char message[NDS_MESSAGE_MAX];
} error_state;

static _Thread_local error_state tls_error;

const char *nds_strerror(int code) {
    switch (code) {
#define NDS_ERR(name, value, text)                                                                 \
    case value:                                                                                    \
        return text;
#include "ndstore/errors.def"
#undef NDS_ERR
    default: return "unknown error";
    }
}

const nds_error *nds_error_last(void) {
    tls_error.pub.message = tls_error.message;
    return &tls_error.pub;
}

void nds_error_clear(void) {
    tls_error.pub.code = 0;
    tls_error.pub.cause_kind = NDS_CAUSE_NONE;
    tls_error.pub.cause = 0;
    tls_error.message[0] = '\0';
}

/* ---- redaction ----
 * One pass over the text, copying it to out: at the start of a URL ("scheme://") its userinfo is
 * replaced; after a query separator ('?', '&', ';', '#', or an encoded "%3F" / "%26") a credential
 * parameter's value is replaced. A secret is what the URL syntax says it is, never guessed from how
 * it looks, so ordinary text is never touched. */

#define REDACTED "***"

/* Query parameters whose value is a credential (lower case, compared after percent-decoding). */
static const char *const secret_params[] = {
    "x-amz-security-token", "x-amz-signature", "x-amz-credential", "x-goog-signature",
    "x-goog-credential", "x-goog-security-token", "awsaccesskeyid", "googleaccessid",
    "access_token", "id_token", "refresh_token", "token", "sig", "signature", "key", "api_key",
    "apikey", "api-key", "password", "passwd", "pwd", "secret", "client_secret", "auth",
    "authorization", "code", "session_token", "security_token", "sas", "credential"};

/* Where a URL (or a parameter value) stops in running text. */
static bool url_end(char c) {
    return c == '\0' || isspace((unsigned char)c) || c == '"' || c == '\'' || c == '<' ||
           c == '>' || c == '`' || c == '|';
}

static int hex(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* An encoded character "%XX" at p equal to want (case-insensitive hex). */
static bool encoded(const char *p, char want) {
    return p[0] == '%' && hex(p[1]) >= 0 && hex(p[2]) >= 0 && hex(p[1]) * 16 + hex(p[2]) == want;
}

/* The length of a URL scheme plus "://" starting at s, at a word start; 0 when there is none. */
static size_t scheme_len(const char *text, const char *s) {
    if (s > text && (isalnum((unsigned char)s[-1]) || strchr("+.-", s[-1])))
        return 0;
    if (!isalpha((unsigned char)s[0]))
        return 0;
    size_t n = 1;
    while (isalnum((unsigned char)s[n]) || (s[n] && strchr("+.-", s[n])))
        n++;
    return strncmp(s + n, "://", 3) == 0 ? n + 3 : 0;
}

/* The length of the userinfo of the authority at a ("user:pw" of "user:pw@host/..."), 0 when it
 * has none. A password may hold '/' (AWS secret keys do): with a "user:" part that is not a port,
 * the userinfo runs to the last '@' before the query. */
static size_t userinfo_len(const char *a) {
    size_t end = 0, host = strcspn(a, "/?#");
    while (!url_end(a[end]))
        end++;
    if (host > end)
        host = end;
    const char *at = NULL;
    for (size_t i = 0; i < host; i++)
        if (a[i] == '@') at = a + i;
    if (at)
        return (size_t)(at - a);
    const char *colon = memchr(a, ':', host);
    if (!colon || strspn(colon + 1, "0123456789") == (size_t)(a + host - colon - 1))
        return 0; /* no "user:", or "host:port" */
    size_t query = host + strcspn(a + host, "?#");
    for (size_t i = host; i < query && i < end; i++)
        if (a[i] == '@') at = a + i;
    return at ? (size_t)(at - a) : 0;
}

/* The length of the query separator at p ('?', '&', ';', '#', "%3F", "%26"), 0 if none;
 * *enc: it was percent-encoded (then "%26" also ends the value). */
static size_t separator_len(const char *p, bool *enc) {
    *enc = false;
    if (*p == '?' || *p == '&' || *p == ';' || *p == '#')
        return 1;
    if (encoded(p, '?') || encoded(p, '&')) {
        *enc = true;
        return 3;
    }
    return 0;
}

/* When a credential parameter "name=" starts at p, the length of "name=" (the '=' maybe "%3D");
 * else 0. */
static size_t secret_name_len(const char *p) {
    char name[32];
    size_t n = 0, i = 0;
    while (p[i] && (isalnum((unsigned char)p[i]) || strchr("-_.%", p[i])) && !encoded(p + i, '=')) {
        char c = p[i];
        if (c == '%' && hex(p[i + 1]) >= 0 && hex(p[i + 2]) >= 0) {
            c = (char)(hex(p[i + 1]) * 16 + hex(p[i + 2]));
            i += 2;
        }
        if (n + 1 >= sizeof name)
            return 0;
        name[n++] = (char)tolower((unsigned char)c);
        i++;
    }
    name[n] = '\0';
    size_t eq = p[i] == '=' ? 1 : encoded(p + i, '=') ? 3 : 0;
    if (n == 0 || eq == 0)
        return 0;
    for (size_t k = 0; k < sizeof secret_params / sizeof secret_params[0]; k++)
        if (strcmp(name, secret_params[k]) == 0)
            return i + eq;
    return 0;
}

/* Appends n bytes of s to out (cap bytes, *used so far), cutting at the end. */
static void put(char *out, size_t cap, size_t *used, const char *s, size_t n) {
    if (*used + 1 >= cap)
        return;
    if (n > cap - 1 - *used)
        n = cap - 1 - *used;
    memcpy(out + *used, s, n);
    *used += n;
}

/* Copies in to out (cap bytes) with its secrets replaced; returns how many. */
static int redact_copy(const char *in, char *out, size_t cap) {
    size_t used = 0;
    int hidden = 0;
    for (const char *p = in; *p;) {
        size_t s = scheme_len(in, p), u, n;
        bool enc;
        if (s && (u = userinfo_len(p + s)) > 0) {
            put(out, cap, &used, p, s);
            put(out, cap, &used, REDACTED, sizeof REDACTED - 1);
            p += s + u, hidden++;
        } else if ((n = separator_len(p, &enc)) > 0 && (u = secret_name_len(p + n)) > 0) {
            put(out, cap, &used, p, n + u);
            p += n + u;
            while (!url_end(*p) && *p != '&' && *p != '#' && *p != ';' && !(enc && encoded(p, '&')))
                p++;
            put(out, cap, &used, REDACTED, sizeof REDACTED - 1);
            hidden++;
        } else {
            put(out, cap, &used, p, 1);
            p++;
        }
    }
    if (cap)
        out[used] = '\0';
    return hidden;
}

int nds_redact_secrets(char *text, size_t cap) {
    if (!text || cap == 0)
        return 0;
    char local[2048];
    char *out = cap <= sizeof local ? local : malloc(cap);
    if (!out) { /* cannot copy: hide everything rather than leak */
        snprintf(text, cap, "%s", REDACTED);
        return 1;
    }
    int hidden = redact_copy(text, out, cap);
    if (hidden)
        memcpy(text, out, strlen(out) + 1);
    if (out != local)
        free(out);
    return hidden;
}

/* Formats into the thread's message, redacted. The whole text is formatted first (on the heap
 * when long) and cut to the message size only after redaction: a cut through a URL would leave
 * a secret that no longer looks like one ("s3://AK:SECRE"). */
static void format_message(const char *fmt, va_list ap) {
    char local[4096];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(local, sizeof local, fmt, ap);
    char *text = local;
    if (n >= (int)sizeof local && (text = malloc((size_t)n + 1)) != NULL)
        vsnprintf(text, (size_t)n + 1, fmt, again);
    va_end(again);
    if (!text)
        text = local;
    if (n < 0)
        local[0] = '\0';
    redact_copy(text, tls_error.message, sizeof tls_error.message);
    if (text != local)
        free(text);
}

static int set_error(int code, nds_cause_kind kind, long cause, const char *fmt, va_list ap) {
    tls_error.pub.code = code;
    tls_error.pub.cause_kind = kind;
    tls_error.pub.cause = cause;
    format_message(fmt, ap);
    return code;
}

int nds_err(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(code, NDS_CAUSE_NONE, 0, fmt, ap);
    va_end(ap);
    return code;
}

int nds_err_cause(int code, nds_cause_kind kind, long cause, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(code, kind, cause, fmt, ap);
    va_end(ap);
    return code;
}

static int map_errno(int err) {
    switch (err) {
    case ENOENT:
    case ENOTDIR: return NDS_ENOTFOUND;
    case EEXIST: return NDS_EEXIST;
    case EACCES:
    case EPERM: return NDS_EPERM;
    case ENOMEM: return NDS_ENOMEM;
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return NDS_ELIMIT;
    case EROFS: return NDS_EREADONLY;
    case ETIMEDOUT: return NDS_ETIMEOUT;
    default: return NDS_EIO;
    }
}

int nds_err_errno(int err, const char *fmt, ...) {
    int code = map_errno(err);
    va_list ap;
    va_start(ap, fmt);
    set_error(code, NDS_CAUSE_ERRNO, err, fmt, ap);
    va_end(ap);
    size_t used = strlen(tls_error.message);
    snprintf(tls_error.message + used, sizeof tls_error.message - used, ": %s", strerror(err));
    return code;
}

int nds_err_prefix(int code, const char *fmt, ...) {
    char old[NDS_MESSAGE_MAX];
    if (tls_error.pub.code == code && tls_error.message[0] != '\0')
        memcpy(old, tls_error.message, sizeof old);
    else
        snprintf(old, sizeof old, "%s", nds_strerror(code));
    char prefix[4 * NDS_MESSAGE_MAX], joined[5 * NDS_MESSAGE_MAX + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (tls_error.pub.code != code) {
        tls_error.pub.cause_kind = NDS_CAUSE_NONE;
        tls_error.pub.cause = 0;
    }
    tls_error.pub.code = code;
    /* Truncation is acceptable here (the message stays one bounded line), but only after the
     * redaction, which must see whole URLs. */
    snprintf(joined, sizeof joined, "%s: %s", prefix, old);
    redact_copy(joined, tls_error.message, sizeof tls_error.message);
    return code;
}

void nds_error_save(nds_error_saved *s, int code) {
    s->code = code;
    s->cause_kind = tls_error.pub.cause_kind;
    s->cause = tls_error.pub.cause;
    if (tls_error.pub.code == code && tls_error.message[0] != '\0')
        snprintf(s->message, sizeof s->message, "%s", tls_error.message);
    else
        snprintf(s->message, sizeof s->message, "%s", nds_strerror(code));
}

int nds_error_restore(const nds_error_saved *s) {
    tls_error.pub.code = s->code;
    tls_error.pub.cause_kind = s->cause_kind;
    tls_error.pub.cause = s->cause;
    snprintf(tls_error.message, sizeof tls_error.message, "%s", s->message);
    return s->code;
}
