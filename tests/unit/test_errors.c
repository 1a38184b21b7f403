/* The last error and the redaction of secrets (nds_redact_secrets): every message the library
 * stores and every kvstore URL it reports have had their credentials hidden. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support_check.h"
#include "internal/error.h"
#include "internal/kvstore_internal.h"

/* in, redacted, must read want and have hidden n secrets. */
static void redacts(const char *in, const char *want, int n) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", in);
    int hidden = nds_redact_secrets(buf, sizeof buf);
    ck_assert_msg(strcmp(buf, want) == 0, "redact(\"%s\") = \"%s\", want \"%s\"", in, buf, want);
    ck_assert_msg(hidden == n, "redact(\"%s\") hid %d, want %d", in, hidden, n);
}

static void untouched(const char *in) { redacts(in, in, 0); }

START_TEST(userinfo) {
    redacts("s3://AK:SECRET@bkt/a.zarr/", "s3://***@bkt/a.zarr/", 1);
    redacts("http://user:pw@host/", "http://***@host/", 1);
    redacts("https://user:pw@host:8443/p?x=1", "https://***@host:8443/p?x=1", 1);
    redacts("http://token@host/", "http://***@host/", 1);
    redacts("gcs://a%3Ab@bkt/", "gcs://***@bkt/", 1);           /* percent-encoded userinfo */
    redacts("http://us%40er:p%2Fw@h/", "http://***@h/", 1);
    /* AWS secret keys hold '/' and '+': with a "user:" the userinfo runs to the '@' */
    redacts("s3://AKIA:abc/def+ghi@bkt/x/", "s3://***@bkt/x/", 1);
    redacts("s3://AKIA:a/b/c@bkt", "s3://***@bkt", 1);
}
END_TEST

START_TEST(query_parameters) {
    redacts("https://h/o?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F2020%2Fs3&X-Amz-Signature="
            "deadbeef&X-Amz-Security-Token=FwoG#frag",
            "https://h/o?X-Amz-Algorithm=AWS4&X-Amz-Credential=***&X-Amz-Signature=***&"
            "X-Amz-Security-Token=***#frag", 3);
    redacts("https://h/o?access_token=ya29.A0&alt=media", "https://h/o?access_token=***&alt=media",
            1);
    redacts("h/o?sig=abc;signature=def&token=ghi&key=jkl",
            "h/o?sig=***;signature=***&token=***&key=***", 4);
    redacts("h?TOKEN=abc", "h?TOKEN=***", 1);                       /* names without case */
    redacts("h?X%2DAmz%2DSignature=abc&b=1", "h?X%2DAmz%2DSignature=***&b=1", 1); /* encoded */
    redacts("h?token%3Dabc", "h?token%3D***", 1);
    redacts("h#access_token=abc&state=s", "h#access_token=***&state=s", 1);
    /* a URL encoded in another one's parameter: its separators are encoded too */
    redacts("https://h/r?next=https%3A%2F%2Fx%2Fp%3Ftoken%3DSECRET%26a%3Db",
            "https://h/r?next=https%3A%2F%2Fx%2Fp%3Ftoken%3D***%26a%3Db", 1);
    redacts("h?key=", "h?key=***", 1);
}
END_TEST

START_TEST(inside_longer_text) {
    redacts("zarr: chunk 0.0 of http://u:pw@h/a/: timed out after 3 attempts",
            "zarr: chunk 0.0 of http://***@h/a/: timed out after 3 attempts", 1);
    redacts("copy s3://A:B@x/ to s3://C:D@y/?token=t done",
            "copy s3://***@x/ to s3://***@y/?token=*** done", 3);
    redacts("{\"base_url\":\"http://u:p@h\",\"path\":\"/a?sig=1\"}",
            "{\"base_url\":\"http://***@h\",\"path\":\"/a?sig=***\"}", 2);
    redacts("spec 'http://u:p@h/a|zarr:': bad", "spec 'http://***@h/a|zarr:': bad", 1);
    redacts("(url=s3://k:s@b/)", "(url=s3://***@b/)", 1);
}
END_TEST

START_TEST(ordinary_text_untouched) {
    untouched("zarr: chunk 0.1 of file:///d/a/: crc32c mismatch");
    untouched("file:///d/x@2.zarr/c/0");              /* '@' in a path */
    untouched("http://host:8080/a@b");                /* a port, then '@' in the path */
    untouched("s3://bkt/a@b/c");
    untouched("mail user@example.com: key=value, token = x");
    untouched("zarr: member \"key\" must be a string");
    untouched("what?key");                            /* no '=' */
    untouched("x?keys=1&tokens=2&monkey=3");          /* names that only contain a secret's */
    untouched("the sig is ok; signature checked");
    untouched("a://b c");
    untouched("://@");
    untouched("");
    untouched("ratio 3:1 @ 5 MB/s");
}
END_TEST

START_TEST(small_buffers) {
    char buf[8] = "h?k=a";
    ck_assert_int_eq(nds_redact_secrets(buf, sizeof buf), 0);
    char b2[10] = "h?key=ab";      /* "***" is longer than the secret: cut to the buffer */
    ck_assert_int_eq(nds_redact_secrets(b2, sizeof b2), 1);
    ck_assert_str_eq(b2, "h?key=***");
    char b3[8] = "h?key=a";
    ck_assert_int_eq(nds_redact_secrets(b3, sizeof b3), 1);
    ck_assert_str_eq(b3, "h?key=*");
    ck_assert_int_eq(nds_redact_secrets(NULL, 4), 0);
    ck_assert_int_eq(nds_redact_secrets(b3, 0), 0);
    /* longer than the function's local buffer */
    size_t n = 5000;
    char *big = malloc(n + 64);
    memset(big, 'x', n);
    strcpy(big + n, " s3://AK:SECRET@b/");
    ck_assert_int_eq(nds_redact_secrets(big, n + 64), 1);
    ck_assert_ptr_null(strstr(big, "SECRET"));
    ck_assert_ptr_nonnull(strstr(big, "s3://***@b/"));
    free(big);
}
END_TEST

START_TEST(error_messages_are_redacted) {
    nds_err(NDS_EIO, "s3: GET %s: 403", "https://h/b/k?X-Amz-Signature=abcdef&x=1");
    ck_assert_str_eq(nds_error_last()->message, "s3: GET https://h/b/k?X-Amz-Signature=***&x=1: 403");
    nds_err_prefix(NDS_EIO, "zarr: chunk 0 of %s", "http://u:pw@h/a/");
    ck_assert_str_eq(nds_error_last()->message,
                     "zarr: chunk 0 of http://***@h/a/: s3: GET https://h/b/k?X-Amz-Signature=***&x=1: 403");
    nds_err_errno(2, "open %s", "s3://k:SEC@b/");
    ck_assert_ptr_null(strstr(nds_error_last()->message, "SEC"));
    /* A URL at the message's end is redacted before the message is cut, never cut to a piece of a
     * secret that no longer looks like one. */
    char pad[1100];
    for (size_t cut = 990; cut < 1030; cut++) {
        memset(pad, 'x', cut);
        pad[cut] = '\0';
        nds_err(NDS_EIO, "%s s3://AKIA:SECRETSECRETSECRET@bkt/", pad);
        ck_assert_ptr_null(strstr(nds_error_last()->message, "SECRET"));
        ck_assert_ptr_null(strstr(nds_error_last()->message, "SECR"));
        nds_err(NDS_EIO, "x");
        nds_err_prefix(NDS_EIO, "%s http://u:SECRETSECRET@h/", pad);
        ck_assert_ptr_null(strstr(nds_error_last()->message, "SECR"));
    }
}
END_TEST

START_TEST(urls_with_credentials_refused) {
    static const char *const urls[] = {"s3://AK:SECRET@bkt/a/", "gcs://tok:SECRET@b/x/",
                                       "http://u:SECRET@127.0.0.1:1/a/",
                                       "https://127.0.0.1:1/a?X-Amz-Signature=SECRET",
                                       "memory://u:SECRET@x/", "s3://b/a?token=SECRET"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        nds_kvstore *kv = NULL;
        ck_assert_int_eq(nds_kvstore_open(&kv, urls[i], NULL), NDS_EINVAL);
        ck_assert_ptr_null(kv);
        ck_assert_ptr_null(strstr(nds_error_last()->message, "SECRET"));
        ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "credential"));
    }
}
END_TEST

START_TEST(kvstore_url_redacted) {
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, "{\"driver\":\"memory\",\"path\":\"a?token=SECRET/\"}", NULL));
    ck_assert_ptr_null(strstr(nds_kvstore_url(kv), "SECRET"));
    ck_assert_str_eq(nds_kvstore_url(kv), "memory://a?token=***"); /* a query value runs on */
    ck_assert_str_eq(nds_kvstore_path(kv), "a?token=SECRET/"); /* the key itself is untouched */
    nds_kvstore_free(kv);
}
END_TEST

int main(void) {
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("redact");
    tcase_add_test(tc, userinfo);
    tcase_add_test(tc, query_parameters);
    tcase_add_test(tc, inside_longer_text);
    tcase_add_test(tc, ordinary_text_untouched);
    tcase_add_test(tc, small_buffers);
    tcase_add_test(tc, error_messages_are_redacted);
    tcase_add_test(tc, urls_with_credentials_refused);
    tcase_add_test(tc, kvstore_url_redacted);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
