"""Run Apache RocketMQ's `mqadmin` (rocketmq-tools, from Maven Central) against a name server.

The tools come with the client build (`java/clients/pom.xml` depends on rocketmq-tools of the
same version), and `mqadmin` is only a shell wrapper around one main class, so this runs that
class directly:

    java -cp CLASSPATH org.apache.rocketmq.tools.command.MQAdminStartup COMMAND -n H:P ...

Typical use::

    admin = MqAdmin(JavaClients.build("5.5.0"))
    result = admin.run("topicRoute", namesrv, "-t", "orders")
    result.exit_code, result.output
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from tests.remoting_clients.java_clients import CLIENT_LOG_DIR, JavaClients, ScenarioError

MAIN_CLASS = "org.apache.rocketmq.tools.command.MQAdminStartup"
COMMAND_TIMEOUT_S = 120
JVM_OPTIONS = (
    "-Xmx128m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    f"-Drocketmq.client.logRoot={CLIENT_LOG_DIR}",
    f"-Drocketmq.log.root={CLIENT_LOG_DIR}",
)
TOOLS_HOME = CLIENT_LOG_DIR / "tools-home"
"""mqadmin 4.9.x reads ROCKETMQ_HOME/conf/logback_tools.xml and stops without it; 5.x ignores it."""
TOOLS_LOGBACK = '<configuration><root level="OFF"/></configuration>\n'
COMMANDS = ("clusterList", "topicList", "topicRoute", "topicStatus", "updateTopic",
            "deleteTopic", "consumerProgress", "queryMsgByKey", "queryMsgById",
            "queryMsgByOffset", "resetOffsetByTime", "brokerStatus")
"""The commands the tests run; mqadmin has many more, and `run` takes any of them."""


@dataclass(frozen=True)
class AdminResult:
    exit_code: int
    output: str
    """stdout and stderr together, as a person at a terminal would see them."""

    @property
    def failed(self) -> bool:
        """MQAdminStartup exits 0 even when its command failed: it prints the exception."""
        return self.exit_code != 0 or "SubCommandException" in self.output

    def table(self) -> list[list[str]]:
        """The rows of the table a command printed under its `#Header  #Header` line."""
        lines = self.output.splitlines()
        headers = [i for i, line in enumerate(lines) if line.startswith("#")]
        if not headers:
            return []
        rows = []
        for line in lines[headers[0] + 1:]:
            if not line.strip():
                break
            rows.append(line.split())
        return rows

    def field(self, name: str) -> str | None:
        """The value of a `Name:   value` line (queryMsgById and queryMsgByOffset print them)."""
        for line in self.output.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == name and value:
                return value.strip()
        return None


@dataclass(frozen=True)
class MqAdmin:
    clients: JavaClients

    def run(self, command: str, namesrv: str, *args: str) -> AdminResult:
        """`mqadmin COMMAND -n namesrv ARGS...`; the exit code and the output, never raises
        for a failed command (the caller decides), only for a hang."""
        (TOOLS_HOME / "conf").mkdir(parents=True, exist_ok=True)
        (TOOLS_HOME / "conf" / "logback_tools.xml").write_text(TOOLS_LOGBACK)
        argv = [self.clients.java, *JVM_OPTIONS, f"-Drocketmq.home.dir={TOOLS_HOME}",
                "-cp", self.clients.classpath, MAIN_CLASS, command, "-n", namesrv, *args]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, encoding="utf-8",
                                  errors="replace", timeout=COMMAND_TIMEOUT_S, check=False,
                                  cwd=CLIENT_LOG_DIR)
        except subprocess.TimeoutExpired as exc:
            raise ScenarioError(f"mqadmin {command} hung for {COMMAND_TIMEOUT_S}s") from exc
        return AdminResult(exit_code=proc.returncode, output=proc.stdout + proc.stderr)
