"""A child process for the kill -9 tests: open an indexer on a directory, say "ready", and
dispatch until killed (or until stdin closes, then close cleanly)."""

from __future__ import annotations

import sys
from pathlib import Path

from mqstore.storage.dispatch.indexer import Indexer
from tests.storage.dispatch.split_helpers import indexer_config


def main() -> None:
    directory = Path(sys.argv[1])
    indexer = Indexer.open(directory, indexer_config(dispatch_records_per_pass_max=50))
    print("ready", flush=True)
    sys.stdin.read()
    indexer.close()


if __name__ == "__main__":
    main()
