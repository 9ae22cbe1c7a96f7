"""A self-signed certificate for 127.0.0.1 and localhost, made per test with the openssl CLI
(the same command docs/security.md gives for local use)."""

from __future__ import annotations

import dataclasses
import ssl
import subprocess
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Certificate:
    cert_file: Path
    key_file: Path

    def client_context(self) -> ssl.SSLContext:
        """A client that trusts this certificate only (and checks the host name)."""
        return ssl.create_default_context(cafile=str(self.cert_file))

    def tls_section(self) -> dict[str, str]:
        """The config file's `tls` section serving this certificate."""
        return {"cert_file": str(self.cert_file), "key_file": str(self.key_file),
                "ca_file": str(self.cert_file)}


def self_signed(directory: Path) -> Certificate:
    directory.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key_file), "-out", str(cert_file)],
                   check=True, capture_output=True)
    return Certificate(cert_file, key_file)
