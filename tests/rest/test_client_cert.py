"""Client certificates on the JSON API (Technical Manual §14.6.2) with real
clients: pyhandle 1.5.0's certificate mode (which sends `Authorization: Handle
clientCert="true"` and the certificate) and curl. The certificates are made
with openssl from the admin's RSA key (HS_PUBKEY at 301:TEST/ADMIN), self-signed,
the identity in the subject's UID or CN."""
import base64
import os
import shutil
import subprocess
import tempfile
import uuid

import pytest
import requests
from pyhandle.client.resthandleclient import RESTHandleClient
from pyhandle.clientcredentials import PIDClientCredentials
from pyhandle.handleexceptions import GenericHandleError, HandleAuthenticationError

from conftest import start

pytestmark = pytest.mark.skipif(not shutil.which("openssl"), reason="openssl makes the test certificates")


def openssl(*args, stdin=None):
    subprocess.run(["openssl", *args], check=True, input=stdin, capture_output=True)


def certificate(directory, key_pem, subject):
    """A self-signed certificate for the PEM key at `key_pem`."""
    cert = os.path.join(directory, f"cert-{uuid.uuid4().hex[:8]}.pem")
    openssl("req", "-x509", "-new", "-key", key_pem, "-subj", subject, "-days", "2", "-out", cert)
    return cert


@pytest.fixture(scope="module")
def certs():
    s = start(config_text="https_client_certificates = true\n")
    d = tempfile.mkdtemp(prefix="handled-certs-")
    pk = s.creds["public_key"]
    der = os.path.join(d, "admin.pk8")
    with open(der, "wb") as f:
        f.write(base64.b64decode(pk["private_key_pkcs8"]))
    admin_key = os.path.join(d, "admin-key.pem")
    openssl("pkey", "-inform", "DER", "-in", der, "-out", admin_key)
    other_key = os.path.join(d, "other-key.pem")
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", other_key)
    identity = f'{pk["index"]}:{s.creds["handle"]}'.replace("/", "\\/")
    yield {
        "server": s,
        "admin_key": admin_key,
        "uid": certificate(d, admin_key, f"/UID={identity}"),
        "cn": certificate(d, admin_key, f"/CN={identity}"),
        "impostor": certificate(d, other_key, f"/CN={identity}"),
        "other_key": other_key,
    }
    s.proc.terminate()
    s.proc.wait(timeout=10)
    shutil.rmtree(d, ignore_errors=True)


def pyhandle_client(server, cert, key):
    creds = PIDClientCredentials(
        client="rest", handle_server_url=server.https, username=f'{server.creds["public_key"]["index"]}:{server.creds["handle"]}',
        certificate_only=cert, private_key=key, HTTPS_verify=False,
    )
    return RESTHandleClient.instantiate_with_credentials(creds, HTTPS_verify=False)


def fresh():
    return f"TEST/cert-{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize("subject", ["uid", "cn"])
def test_pyhandle_writes_with_a_certificate(certs, subject):
    client = pyhandle_client(certs["server"], certs[subject], certs["admin_key"])
    handle = fresh()
    assert client.register_handle(handle, "https://cert.example/" + subject) == handle
    assert client.get_value_from_handle(handle, "URL") == "https://cert.example/" + subject
    client.delete_handle(handle)


def test_a_certificate_of_another_key_is_refused(certs):
    client = pyhandle_client(certs["server"], certs["impostor"], certs["other_key"])
    # pyhandle first reads the handle, with the certificate: that read is refused.
    with pytest.raises((HandleAuthenticationError, GenericHandleError)) as refused:
        client.register_handle(fresh(), "https://impostor.example/")
    assert "not the public key at 301:TEST/ADMIN" in str(refused.value)


def test_curl_with_a_certificate(certs):
    if not shutil.which("curl"):
        pytest.skip("curl is not installed")
    s = certs["server"]
    handle = fresh()
    body = '{"values":[{"index":1,"type":"URL","data":{"format":"string","value":"https://curl.example/"}}]}'
    out = subprocess.run(
        ["curl", "-sk", "--cert", certs["uid"], "--key", certs["admin_key"], "-X", "PUT", "-H",
         "Content-Type: application/json", "-d", body, "-w", "\n%{http_code}", f"{s.https}/api/handles/{handle}"],
        check=True, capture_output=True, text=True,
    ).stdout
    assert out.endswith("\n201"), out
    # The certificate counts only on requests without other credentials: a
    # wrong Basic password beside it is a 401.
    r = requests.put(f"{s.https}/api/handles/{fresh()}", data=body, verify=False,
                     cert=(certs["uid"], certs["admin_key"]), auth=("300%3ATEST%2FADMIN", "wrong"))
    assert r.status_code == 401


def test_without_a_certificate_the_request_says_why(certs):
    s = certs["server"]
    r = requests.put(f"{s.https}/api/handles/{fresh()}", data="{}", verify=False,
                     headers={"Authorization": 'Handle clientCert="true"'})
    assert r.status_code == 401
    assert "no client certificate" in r.json()["message"]


def test_servers_ask_for_no_certificate_by_default(server, certs):
    """Without https_client_certificates the handshake asks for none, so the
    certificate never reaches the server and the request is anonymous."""
    r = requests.put(f"{server.https}/api/handles/{fresh()}", data="{}", verify=False,
                     cert=(certs["uid"], certs["admin_key"]), headers={"Authorization": 'Handle clientCert="true"'})
    assert r.status_code == 401
    assert "no client certificate" in r.json()["message"]
