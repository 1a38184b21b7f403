/* Grouped directory fsyncs for the file kvstore driver (drivers/kv_file.c).
 *
 * A rename or unlink is durable once its directory has been fsynced by a call that STARTED after
 * it. When several threads of a process rename into one directory at once (the chunks of one array
 * write), one fsync started after all their renames serves them all: a caller that finds a sync of
 * its directory already running waits for it, then either finds that a later sync has covered it or
 * runs one itself for everyone waiting. On ext4 every directory fsync is a journal commit, so
 * concurrent chunk writes need about one directory commit per round instead of one per chunk.
 *
 * Threading: safe from any thread; state is per process. Directories are told apart by path (the
 * driver always names a directory the same way); the fsync itself goes through the caller's
 * descriptor of the directory, so it never resolves a path. Up to NDS_FILE_SYNC_SLOTS directories
 * are tracked at once; beyond that a caller simply fsyncs on its own.
 */
#ifndef NDS_DRIVERS_FILE_SYNC_H
#define NDS_DRIVERS_FILE_SYNC_H

#include <stddef.h>
#include <stdint.h>

#define NDS_FILE_SYNC_SLOTS 64

/** malloc'd directory part of path, as the driver names directories: "." when path has no slash,
 *  "/" for an entry in the root. NULL when out of memory. */
char *nds_file_dir_of(const char *path);
/** Length of path's directory part as nds_file_dir_of returns it (the name itself when "."). */
size_t nds_file_dir_len(const char *path);

/** Makes every rename/unlink done in directory dir (open as fd, O_RDONLY) before this call durable.
 *  @return 0 or an errno */
int nds_file_sync_dir(const char *dir, int fd);

/** Counts since the process started: calls of nds_file_sync_dir and fsyncs they ran (for tests and
 *  for measuring the grouping). */
void nds_file_sync_counts(uint64_t *calls, uint64_t *fsyncs);

#endif
