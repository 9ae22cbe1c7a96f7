"""Drive Apache RocketMQ's own store code (on the JVM) for the interop tests.

The Java side lives in ``tests/interop/java``: a pom.xml used only to fetch
``org.apache.rocketmq:rocketmq-store:<version>`` and its dependencies from Maven
Central (``-Drocketmq.version=...``), the shared driver in ``src/main/java`` and,
per major version, the one class whose code differs (``src/rocketmq4/java``,
``src/rocketmq5/java``). Each version is built on first use into
``<repo>/.cache/interop/<version>-<hash>/`` where ``<hash>`` covers the pom, the
Java sources of that version, the version and the ``javac`` version, so edits
trigger a rebuild and unchanged sources are reused across runs.

Nothing here ever skips: a missing ``java``/``javac``/``mvn``, a failed
download or compile, or a non-zero exit of the Java program raises
:class:`RocketMqJvmError` with the tool's output attached.

Typical use::

    from tests.interop.rocketmq_jvm import RocketMqJvm
    jvm = RocketMqJvm.build("4.9.4")
    written = jvm.write(directory, 300, Layout())   # list of dicts, one per message
    long = jvm.write(directory, 48, Layout(), topic_lengths=(128, 200, 255))  # 5.x: V2 records
    records = jvm.read(directory)                   # list of dicts, one per commit-log record
    result = jvm.read_full(directory)               # records plus the summary line
    opened = jvm.open_store(directory, queries, Layout())  # load, start, getMessage, queryMessage
    rebuilt = jvm.rebuild(directory, out, Layout())  # the queues and index RocketMQ builds
    rebuilt = jvm.rebuild_index_files(directory, out, Layout())  # the same, one index file a name
"""

from __future__ import annotations

import dataclasses
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
SHARED_SOURCES = JAVA_PROJECT / "src" / "main" / "java"
MAIN_CLASS = "org.mqstore.interop.RocketMqInterop"
INDEX_REBUILD_CLASS = "org.mqstore.interop.IndexRebuild"
CACHE_ROOT = Path(os.environ.get("MQSTORE_INTEROP_CACHE", REPO_ROOT / ".cache" / "interop"))

ROCKETMQ_494 = "4.9.4"
ROCKETMQ_550 = "5.5.0"
"""The newest 5.x whose store artifact and every dependency resolve from Maven Central."""
ROCKETMQ_VERSIONS = (ROCKETMQ_494, ROCKETMQ_550)

# RocketMQ targets Java 8: MappedFile unmaps buffers through DirectByteBuffer.attachment() and
# jdk.internal.ref.Cleaner.clean() by reflection, which Java 9+ only allows with these opens.
# The driver itself needs JDK 17 (see pom.xml); IgnoreUnrecognizedVMOptions is only a safety net.
JVM_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "-Xmx512m",
)

StrPath = os.PathLike[str] | str

BUILD_TIMEOUT_S = 900  # the first Maven run downloads ~20 jars (4.9.4) or ~110 (5.5.0)
RUN_TIMEOUT_S = 300


class RocketMqJvmError(RuntimeError):
    """The JVM side could not be built or run. Interop tests must fail on this, never skip."""


class ReadResult(NamedTuple):
    records: list[dict[str, Any]]
    summary: dict[str, Any]


@dataclass(frozen=True)
class Layout:
    """The store files' sizes, given to RocketMQ (MessageStoreConfig) and mqstore (StoreConfig)
    alike: each opens the other's files only when they agree."""

    segment_bytes: int = 1 << 20
    consume_queue_file_bytes: int = 1000 * 20
    index_hash_slots: int = 1024
    index_count_max: int = 4096
    query_max: int = 64
    """Messages one queryMessage returns at most (RocketMQ's maxMsgsNumBatch is raised to it)."""

    def jvm_args(self) -> list[str]:
        return [f"--segment={self.segment_bytes}", f"--cq-file={self.consume_queue_file_bytes}",
                f"--index-slots={self.index_hash_slots}", f"--index-count={self.index_count_max}",
                f"--query-max={self.query_max}"]

    def replace(self, **changes: int) -> Layout:
        return dataclasses.replace(self, **changes)


@dataclass
class Opened:
    """What `open` reported: the load line, every queue read with getMessage, every query."""

    load: dict[str, Any]
    queues: dict[tuple[str, int], dict[str, Any]]
    queries: list[dict[str, Any]]
    summary: dict[str, Any] | None
    log: str
    """RocketMQ's own log (stderr), for what the store only logs (where recovery started)."""


def indexes_tags(version: str) -> bool:
    """RocketMQ 5's IndexService.buildIndex also indexes each message's whole TAGS property
    ("topic#T#tags", MessageConst.INDEX_TAG_TYPE); 4.9.x indexes only UNIQ_KEY and KEYS."""
    return int(version.split(".", 1)[0]) >= 5


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


def _source_roots(version: str) -> list[Path]:
    """The shared driver plus the version's own Compat class (src/rocketmq<major>/java)."""
    major = version.split(".", 1)[0]
    versioned = JAVA_PROJECT / "src" / f"rocketmq{major}" / "java"
    if not versioned.is_dir():
        raise RocketMqJvmError(f"no Java sources for RocketMQ {version} (expected {versioned})")
    return [SHARED_SOURCES, versioned]


def _java_sources(version: str) -> list[Path]:
    sources = sorted(path for root in _source_roots(version) for path in root.rglob("*.java"))
    if not sources:
        raise RocketMqJvmError(f"no Java sources for RocketMQ {version}")
    return sources


def _build_hash(javac: str, version: str) -> str:
    digest = hashlib.sha256(f"rocketmq {version}\0".encode())
    for path in [POM, *_java_sources(version)]:
        digest.update(str(path.relative_to(JAVA_PROJECT)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    javac_version = _run([javac, "-version"], timeout=60, what="javac -version")
    digest.update((javac_version.stdout + javac_version.stderr).encode())
    return digest.hexdigest()[:16]


def _json_lines(text: str, what: str) -> list[dict[str, Any]]:
    objects = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            objects.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise RocketMqJvmError(
                f"{what}: stdout line {number} is not JSON: {line[:200]!r}") from exc
    for obj in objects:
        if "bodyHex" in obj:
            obj["body"] = bytes.fromhex(obj["bodyHex"])
    return objects


@dataclass(frozen=True)
class RocketMqJvm:
    java: str
    classpath: str
    version: str = ROCKETMQ_494

    @classmethod
    def build(cls, version: str = ROCKETMQ_494) -> RocketMqJvm:
        """Fetch dependencies and compile once per (version, pom, sources, javac) hash; reuse."""
        java = _require_tool("java")
        javac = _require_tool("javac")
        mvn = _require_tool("mvn")

        build_dir = CACHE_ROOT / f"{version}-{_build_hash(javac, version)}"
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
                        f"-Drocketmq.version={version}",
                        "dependency:copy-dependencies",
                        f"-DoutputDirectory={lib_dir}",
                    ],
                    timeout=BUILD_TIMEOUT_S,
                    what=f"Maven dependency download (RocketMQ {version})",
                )
                if not any(lib_dir.glob(f"rocketmq-store-{version}.jar")):
                    raise RocketMqJvmError(
                        f"Maven ran but {lib_dir} has no rocketmq-store-{version}.jar")
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
                        *map(str, _java_sources(version)),
                    ],
                    timeout=BUILD_TIMEOUT_S,
                    what=f"javac (RocketMQ {version})",
                )
                done_marker.write_text(classpath + "\n")
        return cls(java=java, classpath=classpath, version=version)

    @property
    def indexes_tags(self) -> bool:
        return indexes_tags(self.version)

    # ------------------------------------------------------------------ commands

    def _invoke(self, *args: str, main_class: str = MAIN_CLASS) -> tuple[list[dict[str, Any]], str]:
        what = f"{main_class.rsplit('.', 1)[-1]} {args[0]} (RocketMQ {self.version})"
        proc = _run(
            [self.java, *JVM_OPTIONS, "-cp", self.classpath, main_class, *args],
            timeout=RUN_TIMEOUT_S,
            what=what,
        )
        return _json_lines(proc.stdout, what), proc.stderr

    def write(self, directory: StrPath, count: int, layout: Layout, *,
              crash: bool = False,
              topic_lengths: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
        """Put ``count`` varied messages with RocketMQ's DefaultMessageStore into ``directory``.

        Returns one dict per message in put order (= physical order), with the fields the
        AppendMessageResult and the stored MessageExtBrokerInner report; ``body`` is bytes.
        Then the store shuts down, or with ``crash`` the JVM halts once dispatch caught up
        (no shutdown: the abort file stays and the checkpoint is whatever was last flushed).
        ``topic_lengths``: message i goes to a topic of ``topic_lengths[i % len]`` bytes instead
        of the corpus's 1..127; lengths of 128..255 need RocketMQ 5 (V2 records).
        """
        args = ["write", str(directory), str(count), *layout.jvm_args()]
        if topic_lengths is not None:
            args.append("--topic-lengths=" + ",".join(map(str, topic_lengths)))
        messages, _ = self._invoke(*args, *(["--crash"] if crash else []))
        if len(messages) != count:
            raise RocketMqJvmError(f"write reported {len(messages)} messages, expected {count}")
        return messages

    def read_full(self, directory: StrPath, layout: Layout | None = None) -> ReadResult:
        """Decode every record in ``directory``/commitlog with RocketMQ's decoder + checks."""
        objects, _ = self._invoke("read", str(directory), *(layout or Layout()).jvm_args())
        if not objects or "summary" not in objects[-1]:
            raise RocketMqJvmError("read printed no summary line")
        return ReadResult(records=objects[:-1], summary=objects[-1]["summary"])

    def read(self, directory: StrPath) -> list[dict[str, Any]]:
        return self.read_full(directory).records

    def open_store(self, directory: StrPath, queries: list[tuple[str, ...]],
                   layout: Layout) -> Opened:
        """Load and start RocketMQ's store on ``directory`` itself, read every queue through
        getMessage, run ``queries`` (("queue", topic, id), ("key", topic, key) or ("tag",
        topic, tags)), then shut it down cleanly."""
        queries_file = Path(directory).with_name(Path(directory).name + ".queries.tsv")
        lines = []
        for query in queries:
            fields = [str(part) for part in query]
            if any("\t" in part or "\n" in part for part in fields):
                raise ValueError(f"query fields cannot hold tabs or newlines: {query!r}")
            lines.append("\t".join(fields))
        queries_file.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        try:
            objects, log = self._invoke("open", str(directory), str(queries_file),
                                        *layout.jvm_args())
        finally:
            queries_file.unlink()
        loads = [o["load"] for o in objects if "load" in o]
        if len(loads) != 1:
            raise RocketMqJvmError(f"open printed {len(loads)} load lines")
        queues = {(o["queue"]["topic"], o["queue"]["queueId"]): o["queue"]
                  for o in objects if "queue" in o}
        summaries = [o["summary"] for o in objects if "summary" in o]
        return Opened(load=loads[0], queues=queues,
                      queries=[o["query"] for o in objects if "query" in o],
                      summary=summaries[0] if summaries else None, log=log)

    def rebuild(self, directory: StrPath, out: StrPath, layout: Layout) -> dict[str, Any]:
        """Let RocketMQ build consume queues and index files in ``out`` from a copy of
        ``directory``/commitlog alone (abnormal recovery dispatches every record)."""
        objects, _ = self._invoke("rebuild", str(directory), str(out), *layout.jvm_args())
        if len(objects) != 1 or "rebuild" not in objects[0]:
            raise RocketMqJvmError(f"rebuild printed {objects!r}")
        result: dict[str, Any] = objects[0]["rebuild"]
        return result

    def rebuild_index_files(self, directory: StrPath, out: StrPath,
                            layout: Layout) -> dict[str, Any]:
        """`rebuild` with index files of `layout`'s size however fast they fill: each gets
        a name of its own (IndexRebuild.java), so RocketMQ's index files can be compared one
        for one with mqstore's."""
        objects, _ = self._invoke(str(directory), str(out), *layout.jvm_args(),
                                  main_class=INDEX_REBUILD_CLASS)
        if len(objects) != 1 or "rebuild" not in objects[0]:
            raise RocketMqJvmError(f"IndexRebuild printed {objects!r}")
        result: dict[str, Any] = objects[0]["rebuild"]
        return result


def write(directory: StrPath, count: int, segment_bytes: int) -> list[dict[str, Any]]:
    return RocketMqJvm.build().write(directory, count, Layout(segment_bytes=segment_bytes))


def read(directory: StrPath) -> list[dict[str, Any]]:
    return RocketMqJvm.build().read(directory)
