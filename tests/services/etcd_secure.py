"""A real one-member etcd with TLS, client certificates and authentication on, for the tests.

```
 certificates (made with the openssl CLI at start, in a temp dir)
   ca.pem        the CA of the member and of the client certificate
   server.pem    the member's certificate, SAN IP:127.0.0.1, signed by ca.pem
   client.pem    a client certificate without a Common Name, signed by ca.pem
   client-cn.pem one with a Common Name, which etcd's gateway refuses while auth is on
   other-ca.pem  a CA that signed nothing here: trusting it must fail
 member:  client https://127.0.0.1:C  --client-cert-auth (a client certificate signed by ca.pem
          is required), peer http://127.0.0.1:P, simple tokens that expire after TOKEN_TTL
          seconds without a request
 users:   root (role root), chronoq (readwrite on PREFIX), reader (read only on PREFIX),
          outsider (readwrite elsewhere only)
```

Authentication is switched on through the gateway's HTTP API (etcdctl need not be installed).
Without the etcd binary or openssl the tests skip locally and fail when CI is set, as the
cluster's tests do (tests/services/etcd.py).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
import requests

from tests.helpers import wait_until
from tests.services.etcd import (
    EXIT_TIMEOUT,
    START_TIMEOUT,
    _clean_env,
    _free_ports,
    _missing_service,
    etcd_binary,
)

PREFIX = "chronoq-secure"  # what the user chronoq may read and write
USER, PASSWORD = "chronoq", "s3cret-pw"
OUTSIDER, OUTSIDER_PASSWORD = "outsider", "outsider-pw"
READER, READER_PASSWORD = "reader", "reader-pw"
ROOT_PASSWORD = "root-pw"
TOKEN_TTL = 1  # seconds a simple token lives without a request (etcd's --auth-token-ttl)


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server: Path
    server_key: Path
    client: Path
    client_key: Path
    client_cn: Path
    client_cn_key: Path
    other_ca: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)  # noqa: S607


def _ca(directory: Path, name: str) -> None:
    _openssl(
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
        *("-keyout", f"{name}-key.pem", "-out", f"{name}.pem", "-subj", f"/CN={name}"),
        cwd=directory,
    )


def _signed(directory: Path, name: str, subject: str, extensions: str) -> None:
    """A key and a certificate for `subject`, signed by ca.pem."""
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        *("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem"),
        *("-out", f"{name}.csr", "-subj", subject),
        cwd=directory,
    )
    _openssl(
        *("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem"),
        *("-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext"),
        cwd=directory,
    )


def make_certificates(directory: Path) -> Certificates:
    """A CA, a server certificate for 127.0.0.1, a client certificate, and an unrelated CA."""
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    _signed(
        directory,
        "server",
        "/CN=etcd-test-member",
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    # etcd's gateway refuses a client certificate with a Common Name while auth is on.
    _signed(directory, "client", "/O=chronoq", "extendedKeyUsage=clientAuth\n")
    _signed(directory, "client-cn", f"/CN={USER}", "extendedKeyUsage=clientAuth\n")
    return Certificates(
        ca=directory / "ca.pem",
        server=directory / "server.pem",
        server_key=directory / "server-key.pem",
        client=directory / "client.pem",
        client_key=directory / "client-key.pem",
        client_cn=directory / "client-cn.pem",
        client_cn_key=directory / "client-cn-key.pem",
        other_ca=directory / "other-ca.pem",
    )


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _prefix_end(prefix: str) -> str:
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return base64.b64encode(bytes(raw)).decode()


class SecureEtcd:
    """One etcd member with TLS, client certificate authentication and users; see above."""

    def __init__(self, binary: str, root: Path) -> None:
        self.binary = binary
        self.root = root
        self.certs = make_certificates(root)
        self.client_port, self.peer_port = _free_ports(2)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._session = requests.Session()
        self._session.trust_env = False  # else REQUESTS_CA_BUNDLE would replace `verify`
        self._session.verify = str(self.certs.ca)
        self._session.cert = (str(self.certs.client), str(self.certs.client_key))
        self._root_token = ""

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.client_port}"

    def start(self) -> None:
        self._launch()
        self.wait_healthy()
        self._enable_auth()

    def restart(self) -> None:
        """Kill the member and start it again on its data: every token it gave is forgotten."""
        self._kill()
        self._launch()
        self.wait_healthy()

    def close(self) -> None:
        self._kill()
        self._session.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def healthy(self) -> bool:
        try:
            answer = self._session.get(f"{self.endpoint}/health", timeout=1.0).json()
        except (OSError, ValueError):
            return False
        return bool(answer.get("health") == "true")

    def wait_healthy(self) -> None:
        wait_until(self.healthy, timeout=START_TIMEOUT, what="the TLS etcd member to be healthy")

    def post(self, path: str, body: dict[str, Any], token: str = "") -> dict[str, Any]:
        """A request of the gateway API as root (once auth is on); raises on an error answer."""
        headers = {"Authorization": token} if token else {}
        answer = self._session.post(f"{self.endpoint}/v3/{path}", json=body, headers=headers)
        answer.raise_for_status()
        return dict(answer.json())

    def as_root(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        token = self.post("auth/authenticate", {"name": "root", "password": ROOT_PASSWORD})
        return self.post(path, body, token=str(token["token"]))

    def delete_prefix(self, prefix: str) -> None:
        self.as_root("kv/deleterange", {"key": _b64(prefix), "range_end": _prefix_end(prefix)})

    def _enable_auth(self) -> None:
        self.post("auth/user/add", {"name": "root", "password": ROOT_PASSWORD})
        self.post("auth/role/add", {"name": "root"})
        self.post("auth/user/grant", {"user": "root", "role": "root"})
        for user, password, prefix, kind in (
            (USER, PASSWORD, PREFIX + "/", "READWRITE"),
            (READER, READER_PASSWORD, PREFIX + "/", "READ"),
            (OUTSIDER, OUTSIDER_PASSWORD, "elsewhere/", "READWRITE"),
        ):
            self.post("auth/user/add", {"name": user, "password": password})
            self.post("auth/role/add", {"name": user})
            permission = {"permType": kind, "key": _b64(prefix)}
            permission["range_end"] = _prefix_end(prefix)
            self.post("auth/role/grant", {"name": user, "perm": permission})
            self.post("auth/user/grant", {"user": user, "role": user})
        self.post("auth/enable", {})

    def _launch(self) -> None:
        data = self.root / "data"
        data.mkdir(exist_ok=True)
        self._log = (self.root / "etcd.log").open("ab")
        peer = f"http://127.0.0.1:{self.peer_port}"
        command = [
            self.binary,
            *("--name", "secure", "--data-dir", str(data)),
            *("--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint),
            *("--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer),
            *("--initial-cluster", f"secure={peer}", "--initial-cluster-state", "new"),
            *("--initial-cluster-token", f"chronoq-secure-{uuid.uuid4().hex[:12]}"),
            "--client-cert-auth",
            *("--trusted-ca-file", str(self.certs.ca)),
            *("--cert-file", str(self.certs.server), "--key-file", str(self.certs.server_key)),
            *("--auth-token", "simple", "--auth-token-ttl", str(TOKEN_TTL)),
            *("--heartbeat-interval", "100", "--election-timeout", "1000"),
            *("--logger", "zap", "--log-outputs", "stderr"),
        ]
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=_clean_env()
        )

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(EXIT_TIMEOUT)
        if self._log is not None:
            self._log.close()
            self._log = None


@pytest.fixture(scope="session")
def secure_etcd() -> Iterator[SecureEtcd]:
    """One etcd member with TLS, client certificates and authentication, for the whole run."""
    binary = etcd_binary()
    if binary is None:
        _missing_service(
            "etcd is not installed (/usr/bin/etcd, or etcd on PATH; Debian: etcd-server)"
        )
    if shutil.which("openssl") is None:
        _missing_service("openssl is not installed (it makes the test certificates)")
    assert binary is not None
    member = SecureEtcd(binary, Path(tempfile.mkdtemp(prefix="chronoq-etcd-tls-")))
    try:
        member.start()
    except BaseException:
        member.close()
        raise
    yield member
    member.close()


@pytest.fixture
def secure_prefix(secure_etcd: SecureEtcd) -> Iterator[str]:
    """A key prefix of this test's own under PREFIX, emptied afterwards."""
    prefix = f"{PREFIX}/{uuid.uuid4().hex[:10]}"
    yield prefix
    if not secure_etcd.healthy():
        secure_etcd.restart()
    secure_etcd.delete_prefix(prefix + "/")
