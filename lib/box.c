/* Boxes and NumPy-style region strings: "[0:512, 100:200:2, 7, ...]". */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/box.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/util.h"

void nds_box_full(nds_box *box, size_t rank, const uint64_t *shape) {
    memset(box, 0, sizeof *box);
    box->rank = rank;
    for (size_t d = 0; d < rank; d++) {
        box->stop[d] = shape[d];
        box->step[d] = 1;
    }
}

uint64_t nds_box_extent(const nds_box *box, size_t d) {
    if (box->stop[d] <= box->start[d] || box->step[d] == 0) return 0;
    return nds_ceil_div(box->stop[d] - box->start[d], box->step[d]);
}

uint64_t nds_box_count(const nds_box *box) {
    uint64_t n = 1;
    for (size_t d = 0; d < box->rank; d++)
        if (!nds_mul_u64(n, nds_box_extent(box, d), &n)) return 0;
    return n;
}

int nds_box_check(const nds_box *box, size_t rank, const uint64_t *shape) {
    if (box->rank != rank)
        return nds_err(NDS_ERANGE, "region has %zu dimensions, the array has %zu", box->rank, rank);
    for (size_t d = 0; d < rank; d++) {
        if (box->step[d] == 0)
            return nds_err(NDS_ERANGE, "region dimension %zu: step must be >= 1", d);
        if (box->start[d] > box->stop[d] || box->stop[d] > shape[d])
            return nds_err(NDS_ERANGE, "region dimension %zu: %llu:%llu is outside [0, %llu)", d,
                           (unsigned long long)box->start[d], (unsigned long long)box->stop[d],
                           (unsigned long long)shape[d]);
    }
    return 0;
}

void nds_box_format(const nds_box *box, char *buf, size_t cap) {
    size_t used = 0;
    if (cap == 0) return;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, cap, "[");
    for (size_t d = 0; d < box->rank && used < cap; d++) {
        const char *sep = d ? ", " : "";
        if (box->dropped >> d & 1)
            used += (size_t)snprintf(buf + used, cap - used, "%s%llu", sep,
                                     (unsigned long long)box->start[d]);
        else if (box->step[d] == 1)
            used += (size_t)snprintf(buf + used, cap - used, "%s%llu:%llu", sep,
                                     (unsigned long long)box->start[d],
                                     (unsigned long long)box->stop[d]);
        else
            used += (size_t)snprintf(
                buf + used, cap - used, "%s%llu:%llu:%llu", sep, (unsigned long long)box->start[d],
                (unsigned long long)box->stop[d], (unsigned long long)box->step[d]);
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* One comma-separated item of a region string, trimmed. */
typedef struct item {
    const char *p;
    size_t n;
} item;

static void trim(item *it) {
    while (it->n && isspace((unsigned char)it->p[0])) it->p++, it->n--;
    while (it->n && isspace((unsigned char)it->p[it->n - 1])) it->n--;
}

/* Parses an optional signed integer from text; *present = 0 when empty. */
static int parse_index(item it, size_t d, int *present, long long *out) {
    trim(&it);
    *present = it.n > 0;
    if (!*present) return 0;
    char tmp[32];
    if (it.n >= sizeof tmp) return nds_err(NDS_EINVAL, "region dimension %zu: index too long", d);
    memcpy(tmp, it.p, it.n);
    tmp[it.n] = '\0';
    char *end;
    errno = 0;
    *out = strtoll(tmp, &end, 10);
    if (*end != '\0' || end == tmp)
        return nds_err(NDS_EINVAL, "region dimension %zu: \"%s\" is not an integer", d, tmp);
    if (errno == ERANGE)
        return nds_err(NDS_EINVAL, "region dimension %zu: %s is out of range (at most 2^63 - 1)", d,
                       tmp);
    return 0;
}

/* Resolves a possibly negative index against extent n: -1 -> n-1; clamps slices like NumPy. */
static uint64_t resolve(long long v, uint64_t n) {
    if (v < 0) {
        uint64_t back = (uint64_t)(-(v + 1)) + 1;
        return back > n ? 0 : n - back;
    }
    return (uint64_t)v > n ? n : (uint64_t)v;
}

/* Where a dimension's indices start: 0-based (negative numbers count from the end, slices clamp as
 * NumPy's) unless the domain has an origin there (numbers are domain coordinates, bounds outside
 * the domain are errors). */
typedef struct dim_domain {
    size_t d;
    int64_t origin;
    uint64_t n;
} dim_domain;

static int outside_domain(const dim_domain *dd, long long v) {
    return nds_err(NDS_ERANGE, "region dimension %zu: %lld is outside the domain [%lld, %lld)",
                   dd->d, v, (long long)dd->origin, (long long)dd->origin + (long long)dd->n);
}

/* v as an offset from the origin, in [0, n] (a slice bound) or [0, n) (an index: bound_ok 0). */
static int domain_offset(const dim_domain *dd, long long v, int bound_ok, uint64_t *out) {
    long long rel;
    if (__builtin_sub_overflow(v, (long long)dd->origin, &rel) || rel < 0 ||
        (uint64_t)rel > dd->n || ((uint64_t)rel == dd->n && !bound_ok))
        return outside_domain(dd, v);
    *out = (uint64_t)rel;
    return 0;
}

static int parse_integer_item(nds_box *box, const dim_domain *dd, long long v) {
    size_t d = dd->d;
    uint64_t n = dd->n, index = (uint64_t)v;
    if (dd->origin) {
        int rc = domain_offset(dd, v, 0, &index);
        if (rc) return rc;
    } else {
        /* In unsigned arithmetic: n may exceed LLONG_MAX, and v + n must not overflow. */
        uint64_t back = v < 0 ? (uint64_t)(-(v + 1)) + 1 : 0;
        if (v < 0) index = back <= n ? n - back : n;
        if (index >= n)
            return nds_err(NDS_ERANGE, "region dimension %zu: index %lld is outside [0, %llu)", d,
                           v, (unsigned long long)n);
    }
    box->start[d] = index;
    box->stop[d] = index + 1;
    box->step[d] = 1;
    box->dropped |= UINT64_C(1) << d;
    return 0;
}

/* A slice bound: resolved and clamped (0-based), or checked against the domain. */
static int slice_bound(const dim_domain *dd, int has, long long v, uint64_t absent,
                       uint64_t *out) {
    if (!has) {
        *out = absent;
        return 0;
    }
    if (dd->origin) return domain_offset(dd, v, 1, out);
    *out = resolve(v, dd->n);
    return 0;
}

static int parse_item(nds_box *box, const dim_domain *dd, item it) {
    size_t d = dd->d;
    item part[3];
    size_t parts = 0;
    const char *s = it.p, *end = it.p + it.n;
    size_t colons = 0;
    for (size_t i = 0; i < it.n; i++) colons += it.p[i] == ':';
    if (colons > 2) return nds_err(NDS_EINVAL, "region dimension %zu: too many ':'", d);
    for (const char *q = s; q <= end && parts < 3; q++)
        if (q == end || *q == ':') {
            part[parts++] = (item){s, (size_t)(q - s)};
            s = q + 1;
        }
    int has[3] = {0, 0, 0};
    long long v[3] = {0, 0, 1};
    for (size_t i = 0; i < parts; i++) {
        int rc = parse_index(part[i], d, &has[i], &v[i]);
        if (rc) return rc;
    }
    if (parts == 1) {
        if (!has[0]) return nds_err(NDS_EINVAL, "region dimension %zu: empty index", d);
        return parse_integer_item(box, dd, v[0]);
    }
    if (has[2] && v[2] < 1)
        return nds_err(NDS_EINVAL, "region dimension %zu: step %lld must be >= 1", d, v[2]);
    int rc = slice_bound(dd, has[0], v[0], 0, &box->start[d]);
    if (!rc) rc = slice_bound(dd, has[1], v[1], dd->n, &box->stop[d]);
    if (rc) return rc;
    if (box->stop[d] < box->start[d]) box->stop[d] = box->start[d];
    box->step[d] = (uint64_t)v[2];
    return 0;
}

/* Splits the region text (brackets stripped) into items. */
static int split_items(const char *region, item *items, size_t *count) {
    const char *s = region, *e = region + strlen(region);
    while (s < e && isspace((unsigned char)*s)) s++;
    while (e > s && isspace((unsigned char)e[-1])) e--;
    if (s < e && *s == '[') {
        if (e[-1] != ']') return nds_err(NDS_EINVAL, "region \"%s\": missing ']'", region);
        s++, e--;
    }
    *count = 0;
    item all = {s, (size_t)(e - s)};
    trim(&all);
    if (all.n == 0) return 0;
    const char *p = s;
    for (const char *q = s; q <= e; q++)
        if (q == e || *q == ',') {
            if (*count == NDS_MAX_RANK + 1)
                return nds_err(NDS_EINVAL, "region \"%s\": too many dimensions", region);
            items[*count] = (item){p, (size_t)(q - p)};
            trim(&items[*count]);
            ++*count;
            p = q + 1;
        }
    return 0;
}

static bool is_ellipsis(item it) { return it.n == 3 && memcmp(it.p, "...", 3) == 0; }

int nds_box_parse_domain(nds_box *box, const char *region, size_t rank, const int64_t *origin,
                         const uint64_t *shape) {
    item items[NDS_MAX_RANK + 2];
    size_t count = 0;
    nds_box_full(box, rank, shape);
    int rc = split_items(region, items, &count);
    if (rc) return rc;
    size_t ellipsis = count;
    for (size_t i = 0; i < count; i++)
        if (is_ellipsis(items[i])) {
            if (ellipsis != count)
                return nds_err(NDS_EINVAL, "region \"%s\": more than one '...'", region);
            ellipsis = i;
        }
    size_t explicit_dims = count - (ellipsis != count);
    if (explicit_dims > rank)
        return nds_err(NDS_EINVAL, "region \"%s\" has %zu dimensions, the array has %zu", region,
                       explicit_dims, rank);
    size_t d = 0;
    for (size_t i = 0; i < count; i++) {
        if (i == ellipsis) {
            d += rank - explicit_dims;
            continue;
        }
        if (items[i].n == 0)
            return nds_err(NDS_EINVAL, "region \"%s\": empty dimension %zu", region, d);
        dim_domain dd = {d, origin ? origin[d] : 0, shape[d]};
        if ((rc = parse_item(box, &dd, items[i]))) return rc;
        d++;
    }
    return 0;
}

int nds_box_parse(nds_box *box, const char *region, size_t rank, const uint64_t *shape) {
    return nds_box_parse_domain(box, region, rank, NULL, shape);
}

double nds_unit_metres(const char *name) {
    static const struct {
        const char *name;
        double m;
    } table[] = {{"pm", 1e-12}, {"nm", 1e-9}, {"um", 1e-6}, {"\xc2\xb5m", 1e-6}, {"mm", 1e-3},
                 {"cm", 1e-2},  {"m", 1.0}};
    for (size_t i = 0; name && i < sizeof table / sizeof *table; i++)
        if (strcmp(name, table[i].name) == 0) return table[i].m;
    return 0;
}

int nds_unit_parse(const char *text, const char *what, nds_unit *out) {
    memset(out, 0, sizeof *out);
    char *end;
    errno = 0;
    double size = strtod(text, &end);
    if (end == text) size = 1; /* "nm": one nm */
    size_t n = strlen(end);
    if (errno || !(size > 0) || size > 1e300 || n >= sizeof out->name)
        return nds_err(NDS_EINVAL, "%s: \"%.40s\" is not a unit (a positive number and a unit "
                                   "name of at most %zu bytes, e.g. \"8nm\")",
                       what, text, sizeof out->name - 1);
    out->size = size;
    memcpy(out->name, end, n + 1);
    return 0;
}
