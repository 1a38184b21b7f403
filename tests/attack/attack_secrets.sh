#!/usr/bin/env bash
# Secrets in URLs: userinfo (s3://AK:SECRET@bkt/, http://user:pw@host/) and credential query
# parameters (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, access_token, sig, token,
# key, ...) must never be echoed, on stderr or stdout, by any command: the library redacts every
# error message and kvstore URL, the command line every message it formats. Only 127.0.0.1 is
# ever contacted (port 1: nothing listens, the connection is refused at once).
source "$(dirname "$0")/attack_lib.sh"

# no_secret DESC: neither stdout nor stderr holds a secret marker; the command ended cleanly.
no_secret() {
    clean_exit "$1"
    if [[ "$OUT$ERR" == *SECRET* || "$OUT$ERR" == *s3cr3t* ]]; then
        no "$1: a secret was echoed: $(printf '%s %s' "$OUT" "$ERR" | grep -o '.\{0,40\}\(SECRET\|s3cr3t\).\{0,20\}' | head -2 | tr '\n' ' ')"
    else ok; fi
}

export AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY=testsecretkey AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true AWS_ENDPOINT_URL=http://127.0.0.1:1
ATTACK_TIMEOUT=30

urls=(
    "s3://AKIAEXAMPLE:SECRETKEY@bkt/a.zarr/"
    "s3://AKIAEXAMPLE:SECRET/KEY+x@bkt/a.zarr/"
    "gcs://oauth2:SECRETTOKEN@bkt/a.zarr/"
    "http://user:SECRETPW@127.0.0.1:1/a.zarr/"
    "https://user:SECRETPW@127.0.0.1:1/a.zarr/"
    "http://127.0.0.1:1/a.zarr/?X-Amz-Credential=SECRETCRED&X-Amz-Signature=SECRETSIG"
    "http://127.0.0.1:1/a.zarr?X-Amz-Security-Token=SECRETTOK"
    "http://127.0.0.1:1/a.zarr?access_token=SECRETACCESS&alt=media"
    "https://127.0.0.1:1/a.zarr?sig=SECRETSIG&sv=2020"
    "http://127.0.0.1:1/a.zarr?TOKEN=SECRETTOK"
    "http://127.0.0.1:1/a.zarr?key=SECRETKEY"
    "http://127.0.0.1:1/a.zarr?X%2DAmz%2DSignature=SECRETSIG"
    "memory://u:SECRETPW@x/a.zarr/"
)
for u in "${urls[@]}"; do
    nds info "$u";                    no_secret "info $u"
    nds info "$u|zarr:";              no_secret "info $u|zarr:"
    nds info --json "$u|zarr3:";      no_secret "info --json $u|zarr3:"
    nds ls "$u";                      no_secret "ls $u"
    nds read "$u|zarr:";              no_secret "read $u|zarr:"
    nds cp "$u|zarr:" "$T/copy.zarr"; no_secret "cp from $u"
    nds cp "$T/nothing.zarr" "$u|zarr:"; no_secret "cp to $u"
    nds create "$u|zarr:" --dtype uint8 --shape 4; no_secret "create $u"
    nds verify "$u";                  no_secret "verify $u"
    nds group "$u";                   no_secret "group $u"
    nds checkpoint status "$u" c1;    no_secret "checkpoint status $u"
done

# A URL with credentials is refused outright (the driver never sees it), the message says why.
nds info "s3://AKIAEXAMPLE:SECRETKEY@bkt/a.zarr/"
refused "s3 url with userinfo" "credential"
expect_err "s3://***@bkt/a.zarr/" "the refused url is shown redacted"
nds ls "http://127.0.0.1:1/a/?X-Amz-Signature=SECRETSIG"
refused "http url with a signature" "X-Amz-Signature=***"

# Credentials in JSON specs reach messages through the URLs the drivers build: still redacted.
nds info '{"driver":"zarr","kvstore":{"driver":"http","base_url":"http://user:SECRETPW@127.0.0.1:1","path":"/a/"}}'
no_secret "http spec with userinfo in base_url"
nds info '{"driver":"zarr","kvstore":{"driver":"s3","bucket":"b","endpoint":"http://k:SECRETPW@127.0.0.1:1","path":"a/"}}'
no_secret "s3 spec with userinfo in the endpoint"
nds info '{"driver":"zarr","kvstore":{"driver":"memory","path":"a?token=SECRETTOK/"},"create":true,"schema":{"dtype":"uint8","domain":{"shape":[2]}}}'
no_secret "memory path holding a token parameter"
nds create '{"driver":"zarr","kvstore":{"driver":"memory","path":"a?sig=SECRETSIG/"}}' --dtype uint8 --shape 2
no_secret "create reports a url holding a sig parameter"
check '[[ "$OUT" == *"sig=***"* ]]' "create's report shows the url redacted"

# Messages formatted by the command line itself (bad specs, bad options) are redacted too.
nds cp "s3://AK:SECRETKEY@bkt/a|not a format" "$T/x.zarr"; no_secret "cp with a malformed src spec"
nds create "http://u:SECRETPW@127.0.0.1:1/a|zarr" --dtype uint8 --shape 2; no_secret "create with a malformed pipeline"
nds read "s3://AK:SECRETKEY@bkt/a.zarr/" --region 'http://u:SECRETPW@h/'; no_secret "read with a bad region"
nds info "@$T/missing?token=SECRETTOK.json"; no_secret "info with a missing @file named like a url"

# Ordinary text is not redacted: a local path with '@' and ':' is shown as it is.
mkdir -p "$T/user@host:8080"
nds create "$T/user@host:8080/a.zarr" --dtype uint8 --shape 2; succeeded "create at a path with @ and :"
expect_out "user@host:8080/a.zarr" "the path is printed unredacted"

finish
