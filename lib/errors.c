/* Status code texts and the thread-local last error (message + original cause). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

static int set_error(int code, nds_cause_kind kind, long cause, const char *fmt, va_list ap) {
    tls_error.pub.code = code;
    tls_error.pub.cause_kind = kind;
    tls_error.pub.cause = cause;
    vsnprintf(tls_error.message, sizeof tls_error.message, fmt, ap);
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
    char prefix[NDS_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (tls_error.pub.code != code) {
        tls_error.pub.cause_kind = NDS_CAUSE_NONE;
        tls_error.pub.cause = 0;
    }
    tls_error.pub.code = code;
    /* Truncation is acceptable here: the message stays one bounded line. */
    if (snprintf(tls_error.message, sizeof tls_error.message, "%s: %s", prefix, old) < 0)
        tls_error.message[0] = '\0';
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
