"""What every `mqstore` command shares about its options: the help format that shows each
default, the checks of values, and the refusal of options that do not apply.

An option that does not apply is refused rather than ignored: `mqstore produce --url URL
--queues 2` once made 4 queues without a word (the writer's topics come from its config), and
a user who asked for 2 believes they got 2.  So options that apply to one mode only default to
None, the real default is filled in once the mode is known, and one given in the other mode is
a usage error (exit 2) naming it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

EMBEDDED_DEFAULTS: Mapping[str, object] = {
    "queues": 4, "segment_mib": 64, "flush": "async", "pool": False}
"""`mqstore produce DIR` only (its embedded store's shape); refused with `--url`."""


class UsageError(Exception):
    """Bad input on the command line: message to stderr, exit 2."""


class DefaultsFormatter(argparse.HelpFormatter):
    """argparse's help with "(default: X)" after every option that has a default worth
    showing: not None (mode-dependent options say theirs in their text), not a flag's False,
    not when the text already names it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (action.default in (None, False, argparse.SUPPRESS) or "default" in text
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str,
                summary: str) -> argparse.ArgumentParser:
    """A subcommand whose -h shows `summary` and every option's default."""
    return commands.add_parser(name, help=summary, description=summary,
                               formatter_class=DefaultsFormatter)


def positive(value: int, name: str) -> int:
    if value <= 0:
        raise UsageError(f"{name} must be positive, got {value}")
    return value


def refuse_inapplicable(arguments: argparse.Namespace, names: Mapping[str, object], *,
                        reason: str) -> None:
    """UsageError naming every option of `names` given on the command line (not None)."""
    given = [f"--{name.replace('_', '-')}" for name in names
             if getattr(arguments, name, None) is not None]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be used here: {reason}")


def discard_stdout() -> None:
    """Point stdout at /dev/null once its reader is gone (`| head`, `| tee` after Ctrl-C):
    later prints, and the interpreter's own flush at exit, succeed instead of raising."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
