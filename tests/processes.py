"""Commands for child processes of the tests, safe beside the repository's `operator/` folder.

`python -m X` puts the working directory first on `sys.path`, and PYTHONPATH entries also come
before the standard library; with the repository root there, its `operator/` folder shadows the
standard library's `operator` module and the child dies on import.  So children run with `-P`
(no unsafe path prepended), and test helper modules are found by appending the root, after the
standard library.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).parents[1]

MQSTORE = [sys.executable, "-P", "-m", "mqstore.services.cli"]
"""The `mqstore` command, from the installed package."""


def module_command(module: str) -> list[str]:
    """Run a test helper module (`tests.storage.recovery.crash_writer`) as `__main__`."""
    bootstrap = (f"import runpy, sys; sys.path.append({str(REPO)!r}); "
                 f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-P", "-c", bootstrap]
