/* What every file of the file kvstore driver shares, at the bottom of its files (nothing here calls
 * them): the one place errno becomes a status, the reserved names (temp and lock files), key checks
 * and generations. Callers: kv_file.c, file_write.c, file_root.c. Stateless and thread-safe. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ndstore/sys/kv_driver.h"
#include "internal/error.h"
#include "file_internal.h"

int nds_file_err(int err, const char *what, const char *path) {
    if (err == ENAMETOOLONG || err == ELOOP)
        return nds_err_cause(NDS_EINVAL, NDS_CAUSE_ERRNO, err, "file: %s %s: %s", what, path,
                             strerror(err));
    return nds_err_errno(err, "file: %s %s", what, path);
}

bool nds_file_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

bool nds_file_reserved_name(const char *name) {
    return strstr(name, TMP_MARK) != NULL || nds_file_ends_with(name, LOCK_SUFFIX);
}

bool nds_file_temp_name(const char *name, long *pid) {
    const char *mark = strstr(name, TMP_MARK);
    if (!mark || mark == name)
        return false;
    const char *p = mark + strlen(TMP_MARK), *digits = p;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == digits || p - digits > 10 || *p != '.')
        return false;
    *pid = strtol(digits, NULL, 10);
    const char *hex = ++p;
    while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))
        p++;
    return p - hex == 16 && *p == '\0' && *pid > 0;
}

int nds_file_check_key(const char *key, const char *op) {
    const char *slash = strrchr(key, '/');
    const char *base = slash ? slash + 1 : key;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return nds_err(NDS_EINVAL, "file: %s \"%s\": key does not name a file", op, key);
    if (nds_file_reserved_name(base))
        return nds_err(NDS_EINVAL, "file: %s %s: names ending in %s or containing %s are reserved",
                       op, key, LOCK_SUFFIX, TMP_MARK);
    return 0;
}

void nds_file_gen(const struct stat *st, nds_generation *g) {
    char text[NDS_GENERATION_MAX];
    unsigned long long mtime_ns = (unsigned long long)st->st_mtim.tv_sec * 1000000000ull +
                                  (unsigned long long)st->st_mtim.tv_nsec;
    snprintf(text, sizeof text, "%llx.%llx.%llx.%llx", (unsigned long long)st->st_dev,
             (unsigned long long)st->st_ino, mtime_ns, (unsigned long long)st->st_size);
    nds_generation_set(g, text);
}

void nds_file_gen_absent(nds_generation *g) {
    g->kind = NDS_GEN_ABSENT;
    g->value[0] = '\0';
}
