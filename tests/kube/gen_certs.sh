#!/usr/bin/env bash
# usage: tests/kube/gen_certs.sh DIR
# Generates a throw-away CA, a server certificate for 127.0.0.1/localhost and a
# client certificate (CN=vipd, O=system:vipd) signed by that CA, with the openssl
# CLI. Files: ca.crt ca.key server.crt server.key client.crt client.key
# other-ca.crt (an unrelated CA, for "TLS verification fails" checks).
set -euo pipefail
D=${1:?usage: gen_certs.sh DIR}
mkdir -p "$D"
cd "$D"
q() { "$@" >/dev/null 2>&1; }
q openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=vipd-test-ca"
q openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.crt -days 2 -subj "/CN=other-ca"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > server.ext
q openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=kube-apiserver"
q openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
q openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj "/O=system:vipd/CN=vipd"
q openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2 -extfile client.ext
rm -f ./*.csr ./*.ext ./*.srl
