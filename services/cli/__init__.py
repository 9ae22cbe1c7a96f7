"""The `mqstore` command: `main` (command.py) and its parts, one module per group of commands.

    command.py           the parser, the engine commands (produce, consume, inspect, verify,
                         preallocate, pipeline) and the entry point
    options.py           shared option types, usage errors (exit 2 with one line)
    service_commands.py  writer, indexer, notifier and `up`
    up.py                `mqstore up`: the three services as supervised processes
    terminal.py          produce and consume over HTTP, with progress on a terminal
    inspect_report.py    `mqstore inspect`'s report
    preallocate.py       `mqstore preallocate`: a new store's first segment
"""

from mqstore.services.cli.command import main

__all__ = ["main"]
