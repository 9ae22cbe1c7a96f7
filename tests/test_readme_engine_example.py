"""The README's engine example runs as shown and prints what the README says it prints
(issue 18: it read right after `put_batch` and printed NO_MESSAGE_IN_QUEUE)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _engine_example() -> tuple[str, list[str]]:
    """The README's Python block that opens a `MessageStore`, and the outputs the sentence
    after it promises ("prints `A` and `B`")."""
    text = (ROOT / "README.md").read_text()
    for match in re.finditer(r"```python\n([^`]*)```\n\n(prints .*?\.)", text, re.S):
        if "MessageStore.open" in match.group(1):
            return match.group(1), re.findall(r"`([^`]+)`", match.group(2).split(". ")[0])
    raise AssertionError("README.md has no engine example followed by what it prints")


def test_the_readme_engine_example_prints_what_it_says(tmp_path: Path) -> None:
    code, expected = _engine_example()
    assert expected, "the README names no output"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected
