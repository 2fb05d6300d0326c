"""`oip-asgi serve` over TLS on both wires, with NVIDIA's tritonclient, and restricted APIs on a real server.

The tests make their own CA, a server certificate for 127.0.0.1 and a client certificate.
"""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tests.support.servers import HOST, ROOT, child_env, free_port
from tests.support.waiting import HANG

# geventhttpclient, under tritonclient.http, still checks the host name with the deprecated ssl.match_hostname.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:ssl.match_hostname:DeprecationWarning")]

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


Issuer = tuple[x509.Name, ec.EllipticCurvePrivateKey]


def _certificate(
    name: str, key: ec.EllipticCurvePrivateKey, issuer: Issuer | None, *, ca: bool = False, server: bool = False
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = issuer if issuer is not None else (subject, key)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST)), x509.DNSName("localhost")]),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("oip test CA", ca_key, None, ca=True)
    files = {name: folder / f"{name}.pem" for name in ("ca", "server", "server-key", "client", "client-key")}
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for name, server in (("server", True), ("client", False)):
        key = ec.generate_private_key(ec.SECP256R1())
        _write_key(key, files[f"{name}-key"])
        certificate = _certificate(f"oip test {name}", key, (ca.subject, ca_key), server=server)
        files[name].write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return files


@contextmanager
def tls_server(pki: dict[str, Path], *options: str, client_certificate: bool = False) -> Iterator[tuple[int, int]]:
    """`oip-asgi serve` with HTTPS and gRPC over TLS, until the block ends: (HTTP port, gRPC port)."""
    port, grpc_port = free_port(), free_port()
    argv = [sys.executable, "-m", "oip_asgi", "serve", "tests.apps.guard:models", "--port", str(port)]
    argv += ["--ssl-certfile", str(pki["server"]), "--ssl-keyfile", str(pki["server-key"]), "--log-level", "warning"]
    argv += ["--grpc-port", str(grpc_port), "--grpc-server-cert", str(pki["server"])]
    argv += ["--grpc-server-key", str(pki["server-key"]), *options]
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(argv, cwd=ROOT, env=child_env(), stdout=log, stderr=subprocess.STDOUT)
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    if client_certificate:
        context.load_cert_chain(str(pki["client"]), str(pki["client-key"]))
    try:
        deadline = time.monotonic() + HANG
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise AssertionError(log.read().decode(errors="replace"))
            assert time.monotonic() < deadline, f"the TLS server did not answer within {HANG} s"
            try:
                connection = http.client.HTTPSConnection(HOST, port, context=context, timeout=2)
                try:
                    connection.request("GET", "/v2/health/ready")
                    if connection.getresponse().status == 200:
                        break
                finally:
                    connection.close()
            except OSError:
                pass
            time.sleep(0.05)
        yield port, grpc_port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


def _infer_http(port: int, pki: dict[str, Path]) -> None:
    import tritonclient.http as httpclient

    context = ssl.create_default_context(cafile=str(pki["ca"]))
    client = httpclient.InferenceServerClient(f"{HOST}:{port}", ssl=True, ssl_context_factory=lambda: context)
    try:
        tensor = httpclient.InferInput("X", [3], "FP32")
        tensor.set_data_from_numpy(np.array([1, 2, 3], dtype=np.float32))
        result = client.infer("identity", [tensor])
        np.testing.assert_array_equal(result.as_numpy("Y"), [1, 2, 3])
    finally:
        client.close()


def _grpc_client(port: int, pki: dict[str, Path], *, certificate: bool) -> object:
    import tritonclient.grpc as grpcclient

    files = {"root_certificates": str(pki["ca"])}
    if certificate:
        files |= {"private_key": str(pki["client-key"]), "certificate_chain": str(pki["client"])}
    return grpcclient.InferenceServerClient(f"localhost:{port}", ssl=True, **files)


def _infer_grpc(client: object, **headers: str) -> None:
    import tritonclient.grpc as grpcclient

    tensor = grpcclient.InferInput("X", [3], "FP32")
    tensor.set_data_from_numpy(np.array([1, 2, 3], dtype=np.float32))
    result = client.infer("identity", [tensor], headers=headers or None)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(result.as_numpy("Y"), [1, 2, 3])


def test_tritonclient_over_tls_on_both_wires_and_plaintext_refused(pki: dict[str, Path]) -> None:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    with tls_server(pki, "--grpc-use-ssl") as (port, grpc_port):
        _infer_http(port, pki)
        client = _grpc_client(grpc_port, pki, certificate=False)
        _infer_grpc(client)
        client.close()  # type: ignore[attr-defined]
        plain = http.client.HTTPConnection(HOST, port, timeout=5)
        try:
            with pytest.raises((ConnectionError, http.client.HTTPException)):
                plain.request("GET", "/v2/health/ready")
                plain.getresponse()
        finally:
            plain.close()
        plaintext = grpcclient.InferenceServerClient(f"{HOST}:{grpc_port}")
        with pytest.raises(InferenceServerException):
            plaintext.is_server_live(client_timeout=5)
        plaintext.close()


def _https_status(port: int, context: ssl.SSLContext) -> int:
    connection = http.client.HTTPSConnection(HOST, port, context=context, timeout=30)
    try:
        connection.request("GET", "/v2/health/live")
        return connection.getresponse().status
    finally:
        connection.close()


def test_mutual_tls_refuses_a_client_without_a_certificate(pki: dict[str, Path]) -> None:
    from tritonclient.utils import InferenceServerException

    mutual = ["--grpc-use-ssl=1", "--grpc-root-cert", str(pki["ca"]), "--grpc-use-ssl-mutual"]
    with tls_server(pki, *mutual, "--ssl-ca-certs", str(pki["ca"]), client_certificate=True) as (port, grpc_port):
        _infer_grpc(_grpc_client(grpc_port, pki, certificate=True))
        with pytest.raises(InferenceServerException):
            _grpc_client(grpc_port, pki, certificate=False).is_server_live(client_timeout=5)  # type: ignore[attr-defined]
        context = ssl.create_default_context(cafile=str(pki["ca"]))
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _https_status(port, context)
        context.load_cert_chain(str(pki["client"]), str(pki["client-key"]))
        assert _https_status(port, context) == 200


def test_restricted_apis_on_a_real_server_with_tritonclient(pki: dict[str, Path]) -> None:
    from tritonclient.utils import InferenceServerException

    rules = ["--grpc-restricted-protocol", "inference:infer-key=k1", "--http-restricted-api", "inference:infer-key=k1"]
    with tls_server(pki, "--grpc-use-ssl", *rules) as (port, grpc_port):
        client = _grpc_client(grpc_port, pki, certificate=False)
        with pytest.raises(InferenceServerException, match="expecting header 'triton-grpc-protocol-infer-key'"):
            _infer_grpc(client)
        _infer_grpc(client, **{"triton-grpc-protocol-infer-key": "k1"})
        assert client.is_server_live()  # type: ignore[attr-defined]
        context = ssl.create_default_context(cafile=str(pki["ca"]))
        client.close()  # type: ignore[attr-defined]
        connection = http.client.HTTPSConnection(HOST, port, context=context, timeout=30)
        try:
            connection.request("POST", "/v2/models/identity/infer", body=b"{}")
            response = connection.getresponse()
            assert (response.status, response.read()) == (
                403,
                b'{"error":"This API is restricted, expecting header \'infer-key\'"}',
            )
        finally:
            connection.close()
