"""Fetch jars from Maven Central and compile Java sources against them, once per hash.

The remoting client tests use two small Maven projects under `java/`: `clients/` (Apache
RocketMQ's remoting client and its admin tools, plus our scenario program in
`java/clients/src`) and `peer/` (RocketMQ's name server and broker, nothing compiled).  Each
is built on first use into `<repo>/.cache/remoting_clients/<name>-<version>-<hash>/`, where the
hash covers the pom, the Java sources, the version and `javac -version`: edits rebuild,
unchanged sources are reused across runs.

Nothing here skips: a missing `java`/`javac`/`mvn`, a failed download or compile raises
:class:`BuildError` with the tool's output.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_ROOT = Path(os.environ.get("MQSTORE_REMOTING_CLIENTS_CACHE",
                                 REPO_ROOT / ".cache" / "remoting_clients"))
BUILD_TIMEOUT_S = 900
"""The first Maven run downloads about 110 jars for the 5.5.0 broker: minutes on a slow link."""


class BuildError(RuntimeError):
    """A tool is missing, a download or a compile failed. Tests fail on this, never skip."""


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BuildError(f"'{name}' is not on PATH; the remoting client tests need a JDK "
                         "(java, javac), Maven (mvn) and Go: run scripts/setup.sh")
    return path


def run_checked(argv: list[str], *, timeout_s: float, what: str,
                cwd: Path | None = None,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs a build step; any failure (exit code, timeout) raises BuildError with its output."""
    try:
        proc = subprocess.run(argv, check=False, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", timeout=timeout_s, cwd=cwd,
                              env=env)
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"{what} timed out after {timeout_s}s: {' '.join(argv)}") from exc
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n"
                         f"--- stdout (tail) ---\n{proc.stdout[-4000:]}\n"
                         f"--- stderr (tail) ---\n{proc.stderr[-8000:]}")
    return proc


@dataclass(frozen=True)
class JavaBuild:
    """A built project: its jars (and compiled classes, if it has sources), ready for -cp."""

    java: str
    classpath: str
    lib_dir: Path


def _hash(project: Path, version: str, sources: list[Path], javac: str) -> str:
    digest = hashlib.sha256(f"{project.name} {version}\0".encode())
    for path in [project / "pom.xml", *sources]:
        digest.update(str(path.relative_to(project)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    version_text = run_checked([javac, "-version"], timeout_s=60, what="javac -version")
    digest.update((version_text.stdout + version_text.stderr).encode())
    return digest.hexdigest()[:16]


def build(project: Path, version: str, *, required_jar: str) -> JavaBuild:
    """Fetches `project`'s dependencies at `version` and compiles its `src/`, once per hash.

    `required_jar` is a file name the download must produce (a wrong version that Maven
    resolves to nothing would otherwise go unnoticed until a ClassNotFoundException).
    """
    java, javac, mvn = require_tool("java"), require_tool("javac"), require_tool("mvn")
    sources = sorted((project / "src").rglob("*.java")) if (project / "src").is_dir() else []
    build_dir = CACHE_ROOT / f"{project.name}-{version}-{_hash(project, version, sources, javac)}"
    lib_dir, classes_dir = build_dir / "lib", build_dir / "classes"
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (build_dir / "BUILD_OK").exists():
            shutil.rmtree(lib_dir, ignore_errors=True)
            shutil.rmtree(classes_dir, ignore_errors=True)
            run_checked([mvn, "-q", "-B", "-f", str(project / "pom.xml"),
                         f"-Drocketmq.version={version}", "dependency:copy-dependencies",
                         f"-DoutputDirectory={lib_dir}"],
                        timeout_s=BUILD_TIMEOUT_S,
                        what=f"Maven download ({project.name} {version})")
            if not (lib_dir / required_jar).exists():
                raise BuildError(f"Maven ran but {lib_dir} has no {required_jar}")
            classes_dir.mkdir()
            if sources:
                run_checked([javac, "-encoding", "UTF-8", "-Xlint:all", "-d", str(classes_dir),
                             "-cp", str(lib_dir / "*"), *map(str, sources)],
                            timeout_s=BUILD_TIMEOUT_S, what=f"javac ({project.name} {version})")
            (build_dir / "BUILD_OK").write_text("ok\n")
    classpath = os.pathsep.join([str(classes_dir), str(lib_dir / "*")])
    return JavaBuild(java=java, classpath=classpath, lib_dir=lib_dir)
