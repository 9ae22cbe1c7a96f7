"""The CLI meets user errors with one line and exit 2, never a traceback; its help shows
every option's description and default; options that do not apply are refused; progress
bars show on a terminal only."""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import socket
import struct
import subprocess
import termios
from pathlib import Path

import pytest

from mqstore.services.cli.command import _parser, main
from mqstore.storage import Message, MessageStore
from tests.conftest import small_config
from tests.processes import MQSTORE

OWN_COMMANDS = ("produce", "consume", "inspect", "verify", "writer", "indexer", "notifier",
                "up", "preallocate")
"""The commands this module holds to the help rule (`pipeline` and `admin` have theirs)."""


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "README.md"
    path.write_text("not a store\n")
    return path


@pytest.mark.parametrize(("arguments", "names"), [
    (["produce", "--url", "not-a-url", "--count", "1"], "--url not-a-url"),
    (["consume", "--url", "not-a-url", "--group", "g", "--topic", "T"], "--url not-a-url"),
    (["produce", "{file}", "--count", "1"], "not a directory"),
    (["inspect", "{file}"], "not a directory"),
    (["up", "--data", "{file}"], "not a directory"),
    (["produce", "{file}/store", "--count", "1"], "Not a directory"),
    (["produce", "{file}.store", "--count", "1", "--segment-mib", "1", "--topic", "a/b"],
     "illegal character '/'"),
])
def test_user_errors_are_one_line_and_exit_2(arguments: list[str], names: str, a_file: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main([argument.format(file=a_file) for argument in arguments]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"mqstore {arguments[0]}: ")
    assert names in err


def test_embedded_only_options_are_refused_with_url(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    """`--queues 2` with `--url` once made 4 queues in silence: now it is refused, before
    anything is sent (the URL answers nothing)."""
    assert main(["produce", "--url", "http://127.0.0.1:9", "--queues", "2", "--pool"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mqstore produce: --queues, --pool cannot be used here")


def test_inspect_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """`mqstore inspect DIR | head -3`: the reader leaves, no traceback."""
    with MessageStore.open(tmp_path, small_config()) as store:
        for n in range(50):
            assert store.put(Message("T", n % 4, b"x" * 100)).ok
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([*MQSTORE, "inspect", str(tmp_path)], stdout=write_end,
                              stderr=subprocess.PIPE, timeout=60, check=False)
    finally:
        os.close(write_end)
    assert done.stderr == b""
    assert done.returncode == 141


def _own_subparsers() -> dict[str, argparse.ArgumentParser]:
    actions = [action for action in _parser()._actions
               if isinstance(action, argparse._SubParsersAction)]
    return {name: actions[0].choices[name] for name in OWN_COMMANDS}


@pytest.mark.parametrize("command", OWN_COMMANDS)
def test_help_describes_every_option_with_its_default(command: str) -> None:
    parser = _own_subparsers()[command]
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{command} {action.dest}: no description"
        if action.default not in (None, False):
            assert f"(default: {action.default})" in text, f"{command} {action.dest}"
        elif action.option_strings and not action.required and not isinstance(
                action, argparse._StoreTrueAction):
            assert "default" in action.help, f"{command} {action.dest}: default not named"


def _produce_stderr(tmp_path: Path, *, on_terminal: bool, quiet: bool = False) -> str:
    command = [*MQSTORE, "produce", str(tmp_path / "store"), "--count", "3000",
               "--segment-mib", "1", "--body-bytes", "100", *(["--quiet"] if quiet else [])]
    if not on_terminal:
        done = subprocess.run(command, capture_output=True, timeout=120, check=True)
        return done.stderr.decode()
    leader, follower = pty.openpty()
    # A terminal has a size (a new pty's is 0 x 0, where a bar has no room to draw).
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=follower,
                                   stdin=subprocess.DEVNULL)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(120) == 0
    finally:
        os.close(leader)
    return b"".join(chunks).decode(errors="replace")


BAR = re.compile(r"produce:\s+\d+%")


def test_embedded_produce_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    assert BAR.search(_produce_stderr(tmp_path / "tty", on_terminal=True))
    assert not BAR.search(_produce_stderr(tmp_path / "pipe", on_terminal=False))
    assert not BAR.search(_produce_stderr(tmp_path / "quiet", on_terminal=True, quiet=True))


def test_a_service_whose_port_is_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    """Not a traceback and exit 1 (what `up`'s crash-looping writer printed)."""
    with MessageStore.open(tmp_path, small_config()):
        pass
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        environment = {**os.environ, "MQSTORE_DATA_DIR": str(tmp_path),
                       "MQSTORE_NOTIFIER__PORT": str(holder.getsockname()[1])}
        done = subprocess.run([*MQSTORE, "notifier"], env=environment, capture_output=True,
                              timeout=120, check=False)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("mqstore notifier: cannot listen: ")
