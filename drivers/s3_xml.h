/* The few S3 XML documents the s3 driver reads: ListObjectsV2 pages, error bodies,
 * InitiateMultipartUpload and CompleteMultipartUpload results. A small strict parser (no DTDs, no
 * namespaces prefixes, no external entities); malformed input is an NDS_EFORMAT error, never a
 * crash. Threading: pure functions.
 */
#ifndef NDS_DRIVERS_S3_XML_H
#define NDS_DRIVERS_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Called at the end of each element with its slash-joined path ("ListBucketResult/Contents/Key")
 * and its decoded text (the character data directly inside it, NUL-terminated). Non-zero stops the
 * walk. */
typedef int (*nds_xml_fn)(void *ctx, const char *path, const char *text, size_t len);

/** Walks a document. @return 0, the callback's non-zero value, or NDS_EFORMAT / NDS_ELIMIT /
 * NDS_ENOMEM (with a message naming the byte offset) */
int nds_xml_walk(const char *xml, size_t len, nds_xml_fn fn, void *ctx);

/** One ListObjectsV2 page. */
typedef struct nds_s3_list_page {
    char **keys; /* decoded keys, malloc'd */
    uint64_t *sizes;
    size_t n, cap;
    bool truncated;
    char *next_token; /* NextContinuationToken, malloc'd, or NULL */
} nds_s3_list_page;

/** Parses a ListObjectsV2 result; keys are percent-decoded when url_encoded (encoding-type=url,
 * where
 *  '+' stands for a space as in botocore). Dispose the page even on failure. */
int nds_s3_parse_list(const char *xml, size_t len, bool url_encoded, nds_s3_list_page *out);
void nds_s3_list_page_dispose(nds_s3_list_page *p);

/** Code and Message of an <Error> document into the buffers (empty strings when absent or
 * unparsable).
 *  @return true when the document is an <Error> */
bool nds_s3_parse_error(const char *xml, size_t len, char *code, size_t code_cap, char *msg,
                        size_t msg_cap);

/** The UploadId of an InitiateMultipartUploadResult, malloc'd. @return 0 or NDS_EFORMAT */
int nds_s3_parse_upload_id(const char *xml, size_t len, char **upload_id);

/** Copies the text of the first element at path ("CompleteMultipartUploadResult/ETag") into out.
 *  @return 1 found, 0 not found or not well-formed (the caller's last error is kept either way) */
int nds_xml_find(const char *xml, size_t len, const char *path, char *out, size_t cap);

/** Percent-decodes s (and '+' as space when plus_space) into a malloc'd string; NULL on bad
 * escapes. */
char *nds_s3_url_decode(const char *s, size_t len, bool plus_space);

/** Appends s to out XML-escaped (&, <, >, ", '). @return 0 or NDS_ENOMEM */
struct nds_buf;
int nds_xml_escape_append(struct nds_buf *out, const char *s);

#endif
