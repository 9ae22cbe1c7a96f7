"""Apache RocketMQ's `mqadmin` (rocketmq-tools 5.5.0) in the client pod of
e2e/node_go_client.py, as an operator's debugging pod would run it: given only the name
server's Service address.

No image is built for it.  A Java runtime is made on the host with `jlink` (the modules
rocketmq-tools loads, debug data stripped: about 50 MiB), beside the C++ runtime libraries
`libjvm.so` needs, which the mqstore image need not hold; with the tools' jars (the
clients build of tests/remoting_clients, which depends on rocketmq-tools) it is packed
into one gzip'd tar, cached in .cache/e2e by what went in, and unpacked into the pod's
emptyDir through `kubectl exec` stdin, as the Go client's binary is copied.  The admin
account's keys go into `conf/tools.yml` under the tools' home, where mqadmin 5.x reads
them to sign every request (AclClientRPCHook), as on a broker with ACL."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path

from tests.remoting_clients.java_clients import CLIENT_5, JavaClients
from tests.remoting_clients.maven_build import CACHE_ROOT
from tests.remoting_clients.mqadmin import MAIN_CLASS, TOOLS_LOGBACK, AdminResult

from .kube import Kube
from .node_go_client import CLIENT, WORK_DIR, exec_in_client

JRE_MODULES = ("java.base,java.datatransfer,java.desktop,java.instrument,java.logging,"
               "java.management,java.naming,java.net.http,java.prefs,java.rmi,java.scripting,"
               "java.security.jgss,java.security.sasl,java.sql,java.transaction.xa,java.xml,"
               "jdk.crypto.ec,jdk.unsupported,jdk.zipfs,jdk.management")
"""What rocketmq-tools and its dependencies load (java.desktop for java.beans, which
fastjson reads; jdk.crypto.ec for TLS)."""
NATIVE_LIBRARIES = ("libstdc++.so.6", "libgcc_s.so.1", "libz.so.1")
"""What the runtime's libraries link beyond the C library, copied from the host (the same Debian
release as the image's base)."""
ADMIN_HOME = f"{WORK_DIR}/admin"
BUNDLE_VERSION = "v1"
JVM_OPTIONS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
               f"-Drocketmq.home.dir={ADMIN_HOME}", f"-Drocketmq.client.logRoot={ADMIN_HOME}/logs",
               f"-Drocketmq.log.root={ADMIN_HOME}/logs")
"""-XX:-UsePerfData: the pod's root filesystem is read only, /tmp included."""
COMMAND_TIMEOUT_S = 120.0


def admin_bundle() -> Path:
    """The gzip'd tar of `jre/`, `native/`, `lib/` (the tools' jars) and
    `conf/logback_tools.xml`; built once per clients build."""
    lib_dir = Path(JavaClients.build(CLIENT_5).classpath.split(":")[-1].rstrip("*"))
    key = hashlib.sha256(f"{lib_dir} {JRE_MODULES} {BUNDLE_VERSION}".encode()).hexdigest()[:16]
    bundle = CACHE_ROOT.parent / "e2e" / f"admin-bundle-{key}.tar.gz"
    if bundle.exists():
        return bundle
    bundle.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=bundle.parent) as scratch:
        jre = Path(scratch) / "jre"
        subprocess.run(["jlink", "--add-modules", JRE_MODULES, "--strip-debug",
                        "--no-header-files", "--no-man-pages", "--compress=2",
                        "--output", str(jre)], check=True, capture_output=True, timeout=300)
        partial = bundle.with_suffix(".partial")
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(jre, arcname="jre")
            for library in _native_libraries(jre):
                tar.add(library.resolve(), arcname=f"native/{library.name}")
            for jar in sorted(lib_dir.glob("*.jar")):
                tar.add(jar, arcname=f"lib/{jar.name}")
            _add_text(tar, "conf/logback_tools.xml", TOOLS_LOGBACK)
        partial.rename(bundle)
    return bundle


def _native_libraries(jre: Path) -> list[Path]:
    """The host's copies of NATIVE_LIBRARIES, as `ldd` resolves them for the runtime's
    libraries (libjvm.so, libzip.so)."""
    listing = subprocess.run(["ldd", str(jre / "lib" / "server" / "libjvm.so"),
                              str(jre / "lib" / "libzip.so")], check=True,
                             capture_output=True, text=True).stdout
    found = {name: Path(path) for name, path in re.findall(r"(\S+) => (/\S+)", listing)}
    missing = [name for name in NATIVE_LIBRARIES if name not in found]
    assert not missing, f"ldd found no {missing}:\n{listing}"
    return [found[name] for name in NATIVE_LIBRARIES]


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def install_admin(kube: Kube, namespace: str, keys: tuple[str, str]) -> None:
    """Unpack the bundle into the client pod and write the admin account's tools.yml, once
    per pod (the runtime's files are read only: a second unpack could not overwrite them)."""
    java = f"{ADMIN_HOME}/jre/bin/java"
    if exec_in_client(kube, namespace, "python", "-c",
                      f"import os; print(os.path.exists({java!r}))").strip() == "True":
        return
    access_key, secret_key = keys
    script = ("import sys, tarfile, os\n"
              f"tarfile.open(fileobj=sys.stdin.buffer, mode='r|gz').extractall({ADMIN_HOME!r})\n"
              f"open({ADMIN_HOME!r} + '/conf/tools.yml', 'w').write("
              f"'accessKey: {access_key}\\nsecretKey: {secret_key}\\n')\n")
    exec_in_client(kube, namespace, "python", "-c", script,
                   stdin=admin_bundle().read_bytes(), timeout_s=300)


def mqadmin_in_pod(kube: Kube, namespace: str, command: str, namesrv: str,
                   *args: str) -> AdminResult:
    """`mqadmin COMMAND -n namesrv ARGS...` in the client pod; fails the test when the
    command does (mqadmin prints its exception and exits 0)."""
    argv = ["env", f"LD_LIBRARY_PATH={ADMIN_HOME}/native", f"{ADMIN_HOME}/jre/bin/java",
            *JVM_OPTIONS, "-cp", f"{ADMIN_HOME}/lib/*", MAIN_CLASS, command, "-n", namesrv,
            *args]
    # stderr too: mqadmin prints a failed command's exception there.
    output = exec_in_client(kube, namespace, "sh", "-c", 'exec "$@" 2>&1', "sh", *argv,
                            timeout_s=COMMAND_TIMEOUT_S)
    result = AdminResult(exit_code=0, output=output)
    assert not result.failed, f"mqadmin {command} in pod {CLIENT}:\n{output[-4000:]}"
    return result
