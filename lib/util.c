/* Small internal helpers: products, strings, clocks, random numbers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal/error.h"
#include "internal/util.h"
#include "ndstore/version.h"

const char *nds_version(void) { return NDS_VERSION_STRING; }

bool nds_product_u64(const uint64_t *v, size_t n, uint64_t *out) {
    uint64_t p = 1;
    for (size_t i = 0; i < n; i++)
        if (!nds_mul_u64(p, v[i], &p)) return false;
    *out = p;
    return true;
}

char *nds_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

char *nds_asprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *p = malloc((size_t)n + 1);
    if (!p) return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

/* Normalises rel into out (room for strlen(rel) + 1): components joined by '/', without a
 * leading or trailing one. false when a ".." climbs above rel's start. *dir: rel names a
 * directory. */
static bool path_normalise(const char *rel, char *out, bool *dir) {
    size_t n = 0;
    *dir = false;
    for (const char *p = rel; *p;) {
        size_t len = strcspn(p, "/");
        bool dot = len == 1 && p[0] == '.', dotdot = len == 2 && p[0] == '.' && p[1] == '.';
        if (dotdot) {
            if (n == 0) return false;
            while (n > 0 && out[n - 1] != '/') n--;
            if (n > 0) n--; /* the separator before the removed component */
        } else if (len > 0 && !dot) {
            if (n > 0) out[n++] = '/';
            memcpy(out + n, p, len);
            n += len;
        }
        p += len;
        *dir = *p == '/' || dot || dotdot;
        if (*p == '/') p++;
    }
    out[n] = '\0';
    return true;
}

int nds_path_join(const char *base, const char *rel, const char *what, char **out) {
    char *norm = malloc(strlen(rel) + 1);
    bool dir;
    if (!norm) return nds_err(NDS_ENOMEM, "out of memory");
    if (!path_normalise(rel, norm, &dir)) {
        free(norm);
        return nds_err(NDS_EINVAL, "%s \"%s\" climbs above its root with \"..\"", what, rel);
    }
    size_t bl = strlen(base);
    bool some = norm[0] != '\0';
    bool sep = bl > 0 && base[bl - 1] != '/' && (some || dir);
    *out = nds_asprintf("%s%s%s%s", base, sep ? "/" : "", norm, some && dir ? "/" : "");
    free(norm);
    return *out ? 0 : nds_err(NDS_ENOMEM, "out of memory");
}

int nds_path_check_root(const char *path, const char *what) {
    size_t depth = 0;
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (depth == 0)
                return nds_err(NDS_EINVAL, "%s \"%s\" climbs above its root with \"..\"", what,
                               path);
            depth--;
        } else if (len > 0 && !(len == 1 && p[0] == '.')) {
            depth++;
        }
        p += len + (p[len] == '/');
    }
    return 0;
}

uint64_t nds_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void nds_sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* splitmix64 over a per-thread state seeded from the clock, pid and the state's address, and
 * seeded again in a forked child (which would otherwise repeat its parent's numbers, and every
 * sibling's: the s3 driver's lease owners and probe keys would collide). */
uint64_t nds_random_u64(void) {
    static _Thread_local uint64_t state;
    static _Thread_local pid_t seeded_by;
    if (state == 0 || seeded_by != getpid()) {
        seeded_by = getpid();
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        state = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^
                (uint64_t)(uintptr_t)&state;
    }
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

char *nds_prefix_successor(const char *prefix) {
    char *p = nds_strdup(prefix);
    if (!p) return NULL;
    for (size_t n = strlen(p); n > 0; n--) {
        if ((unsigned char)p[n - 1] != 0xff) {
            p[n - 1]++;
            p[n] = '\0';
            return p;
        }
    }
    p[0] = '\0';
    return p;
}
