"""The length rule for pipeline/ too (tests/test_style.py checks the other folders), and the
layering the pipeline relies on: the `mqstore` command line must not import pyspark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_style import FILE_LINES_MAX, FUNCTION_LINES_MAX

ROOT = Path(__file__).parents[2]
SOURCES = sorted((ROOT / "pipeline").rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_file_and_function_lengths(path: Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= FILE_LINES_MAX, f"{path.name} is over {FILE_LINES_MAX} lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            assert length <= FUNCTION_LINES_MAX, f"{path.name}:{node.name} is {length} lines"


def test_the_command_line_imports_pyspark_only_for_pipeline_jobs() -> None:
    probe = ("import sys; from mqstore.services.cli.command import _parser; _parser(); "
             "print('pyspark' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True, cwd="/")
    assert result.stdout.strip() == "False"
