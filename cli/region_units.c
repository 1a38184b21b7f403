/* Regions in physical units (`--units nm`): every number of a region in a dimension that has a
 * physical unit (cli_physical_of: a precomputed scale's resolution, in nm, an N5 array's units, or
 * the OME-Zarr group's axes units, scale and translation of a dataset) is a coordinate in the
 * given unit, turned into the domain coordinate (index) it falls in: a slice's start and an index
 * round down, a slice's stop rounds up (the voxels the interval touches), a step must be a whole
 * number of voxels. Dimensions without a unit (a precomputed volume's channel) keep plain indices.
 * The result is region text for nds_box_parse_domain, which cli_parse_region (last here) turns
 * into the box a command reads or writes. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ome.h"

/* Dimension d in the region's unit: the size of a voxel (0 when d has no physical unit) and where
 * its index 0 is. */
typedef struct dim_scale {
    size_t d;
    double per_voxel, offset;
} dim_scale;

/* One number of an item: part 0 a start (or an index when alone), 1 a stop, 2 a step. */
static int convert_number(const char *text, size_t len, int part, bool alone,
                          const dim_scale *scale, char *out, size_t cap) {
    size_t d = scale->d;
    double per_voxel = scale->per_voxel, offset = scale->offset;
    char tmp[64];
    if (len >= sizeof tmp) return cli_fail("region dimension %zu: number too long", d);
    memcpy(tmp, text, len);
    tmp[len] = '\0';
    char *end;
    double v = strtod(tmp, &end);
    if (*end != '\0' || end == tmp || !isfinite(v))
        return cli_fail("region dimension %zu: \"%s\" is not a number", d, tmp);
    /* a step is a length; a start or stop a place, measured from where index 0 is */
    double voxels = (part == 2 ? v : v - offset) / per_voxel, r;
    if (part == 2) {
        r = nearbyint(voxels);
        if (r < 1 || fabs(voxels - r) > 1e-9 * fmax(1.0, r))
            return cli_fail("region dimension %zu: step %s is not a whole number of voxels (%g)",
                            d, tmp, voxels);
    } else {
        r = part == 1 && !alone ? ceil(voxels - 1e-9) : floor(voxels + 1e-9);
    }
    if (!(fabs(r) < 9.2e18))
        return cli_fail("region dimension %zu: %s is out of range", d, tmp);
    snprintf(out, cap, "%lld", (long long)r);
    return CLI_OK;
}

/* Converts one item (between commas) of dimension scale->d into out (appended). */
static int convert_item(const char *p, size_t n, const dim_scale *scale, char *out, size_t cap) {
    size_t colons = 0;
    for (size_t i = 0; i < n; i++) colons += p[i] == ':';
    int part = 0;
    const char *s = p;
    for (const char *q = p; q <= p + n; q++) {
        if (q < p + n && *q != ':') continue;
        const char *a = s, *b = q;
        while (a < b && isspace((unsigned char)*a)) a++;
        while (b > a && isspace((unsigned char)b[-1])) b--;
        char num[32] = "";
        if (b > a) {
            int rc = convert_number(a, (size_t)(b - a), part, colons == 0, scale, num, sizeof num);
            if (rc != CLI_OK) return rc;
        }
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%s", num, q < p + n ? ":" : "");
        part++;
        s = q + 1;
    }
    return CLI_OK;
}

/* The voxel size of dimension scale->d in `unit`s (0 when it has no physical unit), and where its
 * index 0 is in `unit`s, into scale. */
static int voxel_size(const nds_unit *u, double at, const char *unit, dim_scale *scale) {
    scale->per_voxel = scale->offset = 0;
    if (u->size <= 0) return CLI_OK;
    double from = nds_unit_metres(u->name), to = nds_unit_metres(unit);
    if (from == 0)
        return cli_fail("region dimension %zu: the array's unit \"%s\" is not a length ndstore "
                        "converts", scale->d, u->name);
    scale->per_voxel = u->size * from / to;
    scale->offset = at * from / to;
    return CLI_OK;
}

int cli_region_from_units(nds_array *a, const char *region, const char *unit, char **out) {
    if (nds_unit_metres(unit) == 0)
        return cli_fail("--units %s: expected pm, nm, um, mm, cm or m", unit);
    size_t rank = nds_array_rank(a);
    cli_physical phys;
    cli_physical_of(a, true, &phys);
    const nds_unit *units = phys.units;
    bool any = false;
    for (size_t d = 0; d < rank; d++) any |= units[d].size > 0;
    if (!any)
        return cli_fail("--units %s: %s has no physical units (a neuroglancer precomputed "
                        "volume's are its resolution; an N5 array's its resolution and units; an "
                        "OME-Zarr dataset's its group's axes units and scale)",
                        unit, nds_kvstore_url(nds_array_kvstore(a)));
    const char *s = region, *e = region + strlen(region);
    while (s < e && isspace((unsigned char)*s)) s++;
    while (e > s && isspace((unsigned char)e[-1])) e--;
    if (s < e && *s == '[' && e[-1] == ']') s++, e--;
    size_t items = 0, ellipsis = SIZE_MAX;
    for (const char *q = s, *p = s; q <= e; q++)
        if (q == e || *q == ',') {
            const char *a0 = p, *b0 = q;
            while (a0 < b0 && isspace((unsigned char)*a0)) a0++;
            while (b0 > a0 && isspace((unsigned char)b0[-1])) b0--;
            if (b0 - a0 == 3 && memcmp(a0, "...", 3) == 0) {
                if (ellipsis != SIZE_MAX)
                    return cli_fail("region \"%s\": more than one '...'", region);
                ellipsis = items;
            }
            items++;
            p = q + 1;
        }
    size_t cap = strlen(region) + 64 * (items + 1) + 16;
    char *text = calloc(1, cap);
    if (!text) return cli_fail("out of memory");
    strcat(text, "[");
    int rc = CLI_OK;
    size_t i = 0;
    for (const char *q = s, *p = s; rc == CLI_OK && q <= e; q++) {
        if (q < e && *q != ',') continue;
        /* items after "..." belong to the last dimensions */
        size_t d = ellipsis != SIZE_MAX && i > ellipsis ? rank - (items - i) : i;
        if (i) strcat(text, ",");
        if (i == ellipsis) {
            strcat(text, "...");
        } else if (d >= rank) {
            rc = cli_fail("region \"%s\" has more dimensions than the array (%zu)", region, rank);
        } else {
            dim_scale scale = {d, 0, 0};
            rc = voxel_size(&units[d], phys.offset[d], unit, &scale);
            if (rc == CLI_OK && scale.per_voxel > 0) {
                rc = convert_item(p, (size_t)(q - p), &scale, text, cap);
            } else if (rc == CLI_OK) {
                size_t used = strlen(text);
                snprintf(text + used, cap - used, "%.*s", (int)(q - p), p);
            }
        }
        i++;
        p = q + 1;
    }
    strcat(text, "]");
    if (rc != CLI_OK) {
        free(text);
        return rc;
    }
    *out = text;
    return CLI_OK;
}

int cli_parse_region(nds_array *a, const char *region, const char *units, nds_box *box) {
    size_t rank = nds_array_rank(a);
    uint64_t shape[NDS_MAX_RANK];
    int64_t origin[NDS_MAX_RANK];
    nds_array_shape(a, shape);
    nds_array_origin(a, origin);
    if (!region) {
        nds_box_full(box, rank, shape);
        return CLI_OK;
    }
    char *converted = NULL;
    if (units && cli_region_from_units(a, region, units, &converted) != CLI_OK)
        return CLI_FAIL;
    nds_error_clear();
    int rc = nds_box_parse_domain(box, converted ? converted : region, rank, origin, shape);
    free(converted);
    if (rc != 0)
        return cli_fail_nds(rc, "region");
    return CLI_OK;
}
