"""commitlog-writer: the only process that appends to `commitlog/`.

`create_app(store, settings)` builds the aiohttp application (tests serve it in-process);
`run_writer(config)` is the process (`mqstore writer --config FILE`).
"""

from mqstore.services.writer.app import create_app
from mqstore.services.writer.run import run_writer

__all__ = ["create_app", "run_writer"]
