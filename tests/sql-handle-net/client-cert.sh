# Client certificates (Technical Manual §14.6.2, issue 27 item 3), sourced by run.sh: one
# self-signed certificate of 300:TEST/ADMIN (whose HS_PUBKEY both servers read from the same
# rows) against Handle.Net and handled, the same requests through curl, the same answers
# expected. The private key is Handle.Net's own admpriv.bin, converted by
# `handled import-config`. Also a certificate of another key with the same identity: refused
# by both. Handle.Net asks for the certificate only after `Authorization: Handle
# clientCert="true"`, by renegotiating the TLS 1.2 connection; handled asks in every handshake
# (https_client_certificates = true).
# Sets CERT_HANDLES (the handles it created); counts failures in $fails.
client_cert_checks() {
  CERT_HANDLES=""
  if ! command -v openssl >/dev/null; then
    echo "   SKIP client certificates: no openssl to make them"
    return 0
  fi
  log "client certificates: 300:TEST/ADMIN's certificate (admpriv.bin's key) through both servers"
  "$BIN" import-config "$SVR" --out "$WORK/imported" >"$WORK/import-config.log" 2>&1 \
    || { cat "$WORK/import-config.log"; die "handled import-config $SVR"; }
  local c="$WORK/certs"; mkdir -p "$c"
  openssl pkey -inform DER -in "$WORK/imported/admin_key.pk8" -out "$c/admin.pem" 2>/dev/null || die "admpriv.bin as PEM"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$c/other.pem" 2>/dev/null || die "openssl genpkey"
  openssl req -x509 -new -key "$c/admin.pem" -subj '/UID=300:TEST\/ADMIN' -days 2 -out "$c/admin-uid.pem" 2>/dev/null \
    && openssl req -x509 -new -key "$c/admin.pem" -subj '/CN=300:TEST\/ADMIN' -days 2 -out "$c/admin-cn.pem" 2>/dev/null \
    && openssl req -x509 -new -key "$c/other.pem" -subj '/UID=300:TEST\/ADMIN' -days 2 -out "$c/impostor.pem" 2>/dev/null \
    || die "openssl req"
  local body='{"values":[{"index":100,"type":"HS_ADMIN","data":{"format":"admin","value":{"handle":"TEST/ADMIN","index":300,"permissions":"111111111111"}}},{"index":1,"type":"URL","data":{"format":"string","value":"https://cert.example/"}}]}'
  # put PORT HANDLE CERT KEY: the HTTP status of a PUT authenticated by the certificate alone.
  put() {
    in_ns curl -sk -m 20 --retry 3 --retry-connrefused --tls-max 1.2 --cert "$3" --key "$4" -X PUT \
      -H 'Authorization: Handle clientCert="true"' -H 'Content-Type: application/json' --data-binary "$body" \
      -o "$WORK/cert-put.out" -w '%{http_code}' "https://127.0.0.1:$1/api/handles/$2"
  }
  # Accepted answers per server and certificate. Handle.Net 9.0.0 on Java 15 and later checks
  # the certificate's key against the HS_PUBKEY in the handshake (an impostor's handshake is
  # refused: "Unable to validate X509 certificate, no matching handle value"), but its Jetty 8
  # then asks the session for getPeerCertificateChain(), which these Javas removed
  # (UnsupportedOperationException in its error.log): the request reaches the API without the
  # certificate and is answered 401 (responseCode 402). That is accepted here, and said, so
  # that a Handle.Net that passes certificates on (an older Java) passes too.
  local hn_log; hn_log=$(ls "$SVR"/logs/error.log* 2>/dev/null | head -1)
  local server port tag got
  for server in "Handle.Net $HS_HTTP_PORT HN" "handled $HANDLED_HTTP HD"; do
    set -- $server; server=$1 port=$2 tag=$3
    for case in "uid admin-uid.pem admin.pem" "cn admin-cn.pem admin.pem" "impostor impostor.pem other.pem"; do
      set -- $case
      got=$(put "$port" "TEST/CERT-$tag-$1" "$c/$2" "$c/$3") || got="handshake refused (curl exit $?)"
      local verdict="unexpected"
      case "$server/$1/$got" in
        */uid/201|*/cn/201) verdict=ok; CERT_HANDLES="$CERT_HANDLES TEST/CERT-$tag-$(echo "$1" | tr a-z A-Z)" ;;
        handled/impostor/401|Handle.Net/impostor/401|Handle.Net/impostor/handshake*) verdict=ok ;;
        Handle.Net/*/401)
          if grep -q "getPeerCertificates" "$hn_log" 2>/dev/null; then
            verdict="known: Handle.Net's Jetty 8 cannot read the certificate on this Java (getPeerCertificateChain removed)"
          fi ;;
      esac
      echo "   $server, certificate $1: $got: $verdict"
      [ "$verdict" != unexpected ] || { fails=$((fails + 1)); sed 's/^/     /' "$WORK/cert-put.out" 2>/dev/null; echo; }
    done
  done
}
