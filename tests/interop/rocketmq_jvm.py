"""Drive Apache RocketMQ 4.9.4's own store code (on the JVM) for the interop tests.

The Java side lives in ``tests/interop/java`` (a pom.xml used only to fetch
``org.apache.rocketmq:rocketmq-store:4.9.4`` and its dependencies from Maven
Central, plus one source file). It is built on first use into
``<repo>/.cache/interop/<hash>/`` where ``<hash>`` covers the pom, the Java
sources and the ``javac`` version, so edits trigger a rebuild and unchanged
sources are reused across runs.

Nothing here ever skips: a missing ``java``/``javac``/``mvn``, a failed
download or compile, or a non-zero exit of the Java program raises
:class:`RocketMqJvmError` with the tool's output attached.

Typical use::

    from tests.interop.rocketmq_jvm import RocketMqJvm
    jvm = RocketMqJvm.build()
    written = jvm.write(directory, 300, 1 << 20)   # list of dicts, one per message
    records = jvm.read(directory)                  # list of dicts, one per commit-log record
    result = jvm.read_full(directory)              # records plus the summary line
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[2]
JAVA_PROJECT = Path(__file__).resolve().parent / "java"
POM = JAVA_PROJECT / "pom.xml"
SOURCE_ROOT = JAVA_PROJECT / "src" / "main" / "java"
MAIN_CLASS = "org.mqstore.interop.RocketMqInterop"
CACHE_ROOT = Path(os.environ.get("MQSTORE_INTEROP_CACHE", REPO_ROOT / ".cache" / "interop"))

# RocketMQ 4.9.4 targets Java 8: MappedFile unmaps buffers through DirectByteBuffer.attachment()
# and jdk.internal.ref.Cleaner.clean() by reflection, which Java 9+ only allows with these opens.
# The driver itself needs JDK 17 (see pom.xml); IgnoreUnrecognizedVMOptions is only a safety net.
JVM_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "-Xmx512m",
)

StrPath = os.PathLike[str] | str

BUILD_TIMEOUT_S = 900  # the first Maven run downloads ~20 jars
RUN_TIMEOUT_S = 300


class RocketMqJvmError(RuntimeError):
    """The JVM side could not be built or run. Interop tests must fail on this, never skip."""


class ReadResult(NamedTuple):
    records: list[dict[str, Any]]
    summary: dict[str, Any]


def _require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RocketMqJvmError(
            f"'{name}' is not on PATH; the RocketMQ interop tests need a JDK "
            "(java, javac) and Maven (mvn)"
        )
    return path


def _run(argv: list[str], *, timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            argv, check=False, capture_output=True, text=True, encoding="utf-8", timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        raise RocketMqJvmError(f"{what} timed out after {timeout}s: {' '.join(argv)}") from exc
    if proc.returncode != 0:
        raise RocketMqJvmError(
            f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n"
            f"--- stdout (tail) ---\n{proc.stdout[-4000:]}\n"
            f"--- stderr (tail) ---\n{proc.stderr[-8000:]}"
        )
    return proc


def _java_sources() -> list[Path]:
    sources = sorted(SOURCE_ROOT.rglob("*.java"))
    if not sources:
        raise RocketMqJvmError(f"no Java sources under {SOURCE_ROOT}")
    return sources


def _build_hash(javac: str) -> str:
    digest = hashlib.sha256()
    for path in [POM, *_java_sources()]:
        digest.update(str(path.relative_to(JAVA_PROJECT)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    version = _run([javac, "-version"], timeout=60, what="javac -version")
    digest.update((version.stdout + version.stderr).encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class RocketMqJvm:
    java: str
    classpath: str

    @classmethod
    def build(cls) -> RocketMqJvm:
        """Fetch dependencies and compile once per (pom, sources, javac) hash; then reuse."""
        java = _require_tool("java")
        javac = _require_tool("javac")
        mvn = _require_tool("mvn")

        build_dir = CACHE_ROOT / _build_hash(javac)
        lib_dir = build_dir / "lib"
        classes_dir = build_dir / "classes"
        done_marker = build_dir / "BUILD_OK"
        classpath = os.pathsep.join([str(classes_dir), str(lib_dir / "*")])

        build_dir.mkdir(parents=True, exist_ok=True)
        # Serialise concurrent builds (e.g. pytest-xdist workers) on a lock file.
        with open(build_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done_marker.exists():
                shutil.rmtree(lib_dir, ignore_errors=True)
                shutil.rmtree(classes_dir, ignore_errors=True)
                _run(
                    [
                        mvn,
                        "-q",
                        "-B",
                        "-f",
                        str(POM),
                        "dependency:copy-dependencies",
                        f"-DoutputDirectory={lib_dir}",
                    ],
                    timeout=BUILD_TIMEOUT_S,
                    what="Maven dependency download",
                )
                if not any(lib_dir.glob("rocketmq-store-*.jar")):
                    raise RocketMqJvmError(f"Maven ran but {lib_dir} has no rocketmq-store jar")
                classes_dir.mkdir(parents=True)
                _run(
                    [
                        javac,
                        "-encoding",
                        "UTF-8",
                        "-Xlint:all",
                        "-d",
                        str(classes_dir),
                        "-cp",
                        str(lib_dir / "*"),
                        *map(str, _java_sources()),
                    ],
                    timeout=BUILD_TIMEOUT_S,
                    what="javac",
                )
                done_marker.write_text(classpath + "\n")
        return cls(java=java, classpath=classpath)

    # ------------------------------------------------------------------ commands

    def _invoke(self, *args: str) -> list[dict[str, Any]]:
        proc = _run(
            [self.java, *JVM_OPTIONS, "-cp", self.classpath, MAIN_CLASS, *args],
            timeout=RUN_TIMEOUT_S,
            what=f"RocketMqInterop {args[0]}",
        )
        objects = []
        for number, line in enumerate(proc.stdout.splitlines(), 1):
            if not line.strip():
                continue
            try:
                objects.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise RocketMqJvmError(
                    f"RocketMqInterop {args[0]}: stdout line {number} is not JSON: {line[:200]!r}"
                ) from exc
        for obj in objects:
            if "bodyHex" in obj:
                obj["body"] = bytes.fromhex(obj["bodyHex"])
        return objects

    def write(self, directory: StrPath, count: int, segment_bytes: int) -> list[dict[str, Any]]:
        """Put ``count`` varied messages with RocketMQ's DefaultMessageStore into ``directory``.

        Returns one dict per message in put order (= physical order), with the fields the
        AppendMessageResult and the stored MessageExtBrokerInner report; ``body`` is bytes.
        """
        messages = self._invoke("write", str(directory), str(count), str(segment_bytes))
        if len(messages) != count:
            raise RocketMqJvmError(f"write reported {len(messages)} messages, expected {count}")
        return messages

    def read_full(self, directory: StrPath) -> ReadResult:
        """Decode every record in ``directory``/commitlog with RocketMQ's decoder + checks."""
        objects = self._invoke("read", str(directory))
        if not objects or "summary" not in objects[-1]:
            raise RocketMqJvmError("read printed no summary line")
        return ReadResult(records=objects[:-1], summary=objects[-1]["summary"])

    def read(self, directory: StrPath) -> list[dict[str, Any]]:
        return self.read_full(directory).records


def write(directory: StrPath, count: int, segment_bytes: int) -> list[dict[str, Any]]:
    return RocketMqJvm.build().write(directory, count, segment_bytes)


def read(directory: StrPath) -> list[dict[str, Any]]:
    return RocketMqJvm.build().read(directory)
