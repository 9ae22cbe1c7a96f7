"""The real e2e node's certificates, made with openssl at `up`: one CA, the API server's
serving certificate (valid for every address a client uses: 127.0.0.1 through the port
forward on the host, the node address inside the namespace, the `kubernetes` Service's
ClusterIP and its names), the API server's client certificate towards the kubelet, and
the service-account signing key pair.  They live for `VALIDITY_DAYS`; a run is hours."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

from .node_config import API_SERVICE_IP, CLUSTER_DOMAIN, NODE_IP

VALIDITY_DAYS = 7
KEY_BITS = 2048


@dataclasses.dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    apiserver_cert: Path
    apiserver_key: Path
    kubelet_client_cert: Path
    kubelet_client_key: Path
    service_account_key: Path
    service_account_pub: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _signed(directory: Path, name: str, subject: str, ca: tuple[Path, Path],
            extensions: str) -> tuple[Path, Path]:
    key, csr, cert = (directory / f"{name}.key", directory / f"{name}.csr",
                      directory / f"{name}.crt")
    ext = directory / f"{name}.ext"
    ext.write_text(extensions)
    _openssl("req", "-new", "-newkey", f"rsa:{KEY_BITS}", "-nodes", "-keyout", str(key),
             "-subj", subject, "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
             "-CAcreateserial", "-days", str(VALIDITY_DAYS), "-extfile", str(ext),
             "-out", str(cert))
    csr.unlink()
    ext.unlink()
    return cert, key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    ca_cert, ca_key = directory / "ca.crt", directory / "ca.key"
    _openssl("req", "-x509", "-newkey", f"rsa:{KEY_BITS}", "-nodes", "-keyout", str(ca_key),
             "-out", str(ca_cert), "-days", str(VALIDITY_DAYS), "-subj", "/CN=mqstore-e2e-ca")
    names = ["kubernetes", "kubernetes.default", "kubernetes.default.svc",
             f"kubernetes.default.svc.{CLUSTER_DOMAIN}", "localhost"]
    alt = ",".join([f"DNS:{n}" for n in names]
                   + [f"IP:{ip}" for ip in ("127.0.0.1", NODE_IP, API_SERVICE_IP)])
    apiserver_cert, apiserver_key = _signed(
        directory, "apiserver", "/CN=kube-apiserver", (ca_cert, ca_key),
        f"subjectAltName={alt}\nextendedKeyUsage=serverAuth\n")
    client_cert, client_key = _signed(
        directory, "apiserver-kubelet-client",
        "/O=system:masters/CN=kube-apiserver-kubelet-client", (ca_cert, ca_key),
        "extendedKeyUsage=clientAuth\n")
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    _openssl("genrsa", "-out", str(sa_key), str(KEY_BITS))
    _openssl("rsa", "-in", str(sa_key), "-pubout", "-out", str(sa_pub))
    return Pki(ca_cert, ca_key, apiserver_cert, apiserver_key, client_cert, client_key,
               sa_key, sa_pub)
