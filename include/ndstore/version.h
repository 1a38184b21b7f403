/* ndstore version and export macro. */
#ifndef NDSTORE_VERSION_H
#define NDSTORE_VERSION_H

#define NDS_VERSION_MAJOR 0
#define NDS_VERSION_MINOR 1
#define NDS_VERSION_PATCH 0
#define NDS_VERSION_STRING "0.1.0"

/* The library is built with -fvisibility=hidden; only NDS_API declarations are exported. */
#if defined(NDS_BUILDING_LIBRARY) && defined(__GNUC__)
#define NDS_API __attribute__((visibility("default")))
#else
#define NDS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif
/** The library's version string, e.g. "0.1.0". Any thread. */
NDS_API const char *nds_version(void);
#ifdef __cplusplus
}
#endif
#endif
