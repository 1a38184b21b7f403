/* Variable-length arrays (string / bytes, issue 20) on the command line: JSON Lines in and out
 * (read, write, cp), their dtype label and fill value (info). One element per line in C order, a
 * JSON string: the text for string arrays, base64 of the bytes for bytes arrays. */
#ifndef NDS_CLI_STRINGS_IO_H
#define NDS_CLI_STRINGS_IO_H

#include <stdbool.h>
#include <stdio.h>
#include <json-c/json.h>
#include "ndstore/ndstore.h"

/** "string" / "bytes", with the zarr v2 typestring and object codec when there is one:
 *  "string (|O vlen-utf8)". */
void cli_vlen_label(nds_array *a, char *buf, size_t cap);
/** The fill element as a new JSON string (base64 for bytes arrays). */
json_object *cli_vlen_fill_json(nds_array *a);
/** `ndstore read` of a variable-length array: JSON Lines to output ("-": stdout; NULL: stdout, at
 *  most CLI_PRINT_LIMIT elements), streamed in slabs along the first dimension. A .npy output is
 *  refused, naming JSON Lines. @return exit status (errors printed) */
int cli_read_strings(nds_array *a, const nds_box *box, const char *output,
                     const nds_io_options *io);
/** `ndstore write` of a variable-length array: one JSON string per line of in (name for
 *  messages), exactly the region's element count, written slab by slab. *bytes receives the
 *  element bytes written. @return exit status (errors printed, naming the line) */
int cli_write_strings(nds_array *a, const nds_box *box, FILE *in, const char *name,
                      const nds_io_options *io, uint64_t *bytes);
/** Copies box of src into the same box of dst (both variable-length, same dtype), slab by slab
 *  (cp). @return exit status */
int cli_copy_strings(nds_array *src, nds_array *dst, const nds_box *box, const nds_io_options *io);

#endif
