"""Every path the docs, docstrings and comments name exists, and none cites a missing document.

What is checked:

* Markdown (README.md and every .md file under docs/), the whole text: every repository
  path (the rule below), every relative link target (resolved from the document's folder),
  every `#anchor` of a link or of a path into a Markdown file (a heading of that file), and
  every bare file name ending in .py (some file of that name in the repository).
* Python (every .py file under the source folders), docstrings and comments only: every
  repository path, every relative path of a .py or .md file (resolved from the file's
  folder or any folder above it, up to the repository root), and every bare file name
  ending in .py (in the same folder, or anywhere under the same top-level folder).
* YAML comments under charts/: every repository path.
* All of them: no citation of documents that were never in the repository (the upper-case
  architecture document, numbered "seed" documents, "spec" sections with a section sign).

The rule for what a repository path is: a token that starts with one of the repository's
top-level folders (`storage/`, `docs/`, `charts/`, ...; a leading `./` is allowed), up to
the first character no path contains.  So the volume's own paths (`<store>/commitlog/...`,
`consumequeue/<topic>/...`, `./data`, `/tmp/...`) are never taken for repository paths:
they start with a placeholder, a data folder or `/`.  In a path, `<name>`, `{name}`, `*` and
`...` stand for any part of a name, and the path must match at least one file or folder.  A
path under a folder .gitignore names (`bench/results/`, `.cache/`) is a tool's output, not
a citation: skipped.

ALLOWLIST holds the few exceptions, each with its reason.
"""

from __future__ import annotations

import ast
import fnmatch
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
TOP_FOLDERS = ("storage", "services", "client", "operator", "pipeline", "charts", "e2e",
               "bench", "scripts", "tests", "docs", ".ci")
SOURCE_FOLDERS = ("storage", "services", "client", "operator", "pipeline", "bench", "scripts",
                  "e2e", "tests")
PATH_CHARS = r"[A-Za-z0-9_.*<>{}/-]"
REPOSITORY_PATH = re.compile(
    rf"(?<![\w./<>{{}}-])(?:\./)?((?:{'|'.join(re.escape(f) for f in TOP_FOLDERS)})"
    rf"/{PATH_CHARS}*(?:#[\w-]+)?)")
RELATIVE_FILE = re.compile(r"(?<![\w./<>{}-])((?:[\w-]+/)+[\w-]+\.(?:py|md)(?:#[\w-]+)?)\b")
BARE_PY = re.compile(r"(?<![\w./<>{}-])([A-Za-z_][\w]*\.py)\b")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
MISSING_DOCUMENTS = re.compile(
    "|".join((r"\bARCHITECTURE\b", r"(?i:\bseed\s+0\d\d\b)", "(?i:\\bspec\\s*\u00a7)")))

ALLOWLIST: dict[tuple[str, str], str] = {}


@cache
def _ignored_folders() -> tuple[str, ...]:
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return tuple(line.strip().lstrip("/") for line in lines
                 if line.strip().endswith("/") and not line.startswith("#"))


def _is_output(path: str) -> bool:
    return any(path.startswith(folder) or f"/{folder}" in f"/{path}"
               for folder in _ignored_folders())


def _clean(token: str) -> str:
    token = re.sub(r"(:\d+(-\d+)?|::\w+)$", "", token)
    return token.rstrip(".,:;")


def _matches(base: Path, path: str) -> bool:
    """`path` (with placeholders) names at least one existing file or folder under `base`."""
    pattern = re.sub(r"<[^>/]*>|\{[^}/]*\}|\.\.\.", "*", path.rstrip("/"))
    if "*" not in pattern:
        return (base / pattern).exists()
    parts = pattern.split("/")
    candidates = [base]
    for part in parts:
        candidates = [child for parent in candidates if parent.is_dir()
                      for child in parent.iterdir() if fnmatch.fnmatchcase(child.name, part)]
    return bool(candidates)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*$", _without_code(path.read_text()), re.M)
    return frozenset(_slug(heading) for heading in headings)


def _without_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _problem(base: Path, target: str) -> str | None:
    """Why `target` (relative to `base`, maybe with an #anchor) does not resolve, or None."""
    path, _, anchor = target.partition("#")
    if path and not _matches(base, path):
        return "no such file"
    if anchor and (path.endswith(".md") or not path):
        document = (base / path) if path else base
        if document.is_file() and anchor not in _anchors(document):
            return f"no heading #{anchor}"
    return None


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _python_files() -> list[Path]:
    return sorted(path for folder in SOURCE_FOLDERS for path in (ROOT / folder).rglob("*.py"))


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring (any string statement) and comment of a Python file."""
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            yield node.lineno, node.value.value
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _markdown_problems(path: Path) -> Iterator[str]:
    text = path.read_text()
    for target in MARKDOWN_LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        base = path.parent if not target.startswith("#") else path
        problem = _problem(base, target)
        if problem:
            yield f"{_name(path)}: link ({target}): {problem}"
    yield from _repository_path_problems(_name(path), text)
    for name in sorted(set(BARE_PY.findall(text))):
        if not _python_named(name):
            yield f"{_name(path)}: {name}: no file of that name in the repository"


@cache
def _repository_files() -> tuple[str, ...]:
    """Every file's path from the root, outside hidden folders and build outputs."""
    skipped = {"build", "__pycache__"}
    return tuple(str(path.relative_to(ROOT)) for path in ROOT.rglob("*")
                 if path.is_file() and not any(part.startswith(".") or part in skipped
                                               or part.endswith(".egg-info")
                                               for part in path.relative_to(ROOT).parts))


def _python_named(name: str, under: str = "") -> bool:
    """Some file called `name` exists (under the folder `under`, if given)."""
    prefix = f"{under}/" if under else ""
    return any(path.startswith(prefix) and path.rsplit("/", 1)[-1] == name
               for path in _repository_files())


def _python_problems(path: Path) -> Iterator[str]:
    relative, top = _name(path), _name(path).split("/")[0]
    for line, text in _prose(path):
        where = f"{relative}:{line}"
        yield from _repository_path_problems(where, text)
        for token in map(_clean, RELATIVE_FILE.findall(text)):
            if token.split("/")[0] in TOP_FOLDERS:
                continue  # checked above, from the root
            bases = [path.parent, *path.parent.parents]
            if all(_problem(base, token) for base in bases if ROOT in (base, *base.parents)):
                yield f"{where}: {token}: not found from {path.parent.name}/ or above"
        for name in BARE_PY.findall(text):
            if (relative, name) in ALLOWLIST:
                continue
            if not (path.parent / name).exists() and not _python_named(name, top):
                yield f"{where}: {name}: no such file in {path.parent.name}/ or under {top}/"


def _repository_path_problems(where: str, text: str) -> Iterator[str]:
    for token in map(_clean, REPOSITORY_PATH.findall(text)):
        problem = None if _is_output(token) else _problem(ROOT, token)
        if problem:
            yield f"{where}: {token}: {problem}"
    for found in MISSING_DOCUMENTS.findall(text):
        yield f"{where}: cites {found!r}, which is not in the repository"


def _yaml_problems(path: Path) -> Iterator[str]:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.lstrip().startswith("#"):
            yield from _repository_path_problems(f"{_name(path)}:{number}", line)


@pytest.mark.parametrize("path", _markdown_files(), ids=_name)
def test_markdown_names_only_existing_paths(path: Path) -> None:
    problems = list(_markdown_problems(path))
    assert not problems, "\n".join(problems)


def test_python_docstrings_and_comments_name_only_existing_paths() -> None:
    problems = [problem for path in _python_files() for problem in _python_problems(path)]
    assert not problems, "\n".join(problems)


def test_chart_yaml_comments_name_only_existing_paths() -> None:
    files = sorted([*(ROOT / "charts").rglob("*.yaml"), *(ROOT / "charts").rglob("*.tpl")])
    problems = [problem for path in files for problem in _yaml_problems(path)]
    assert not problems, "\n".join(problems)


def test_allowlist_entries_are_still_needed() -> None:
    """An entry whose file no longer names the path must go: the allowlist only shrinks."""
    for (relative, name), _reason in ALLOWLIST.items():
        texts = [text for _, text in _prose(ROOT / relative)]
        assert any(re.search(rf"(?<![\w./]){re.escape(name)}", text) for text in texts), \
            f"{relative} no longer names {name}: remove it from ALLOWLIST"


def test_the_checks_catch_a_bad_path() -> None:
    """The rules find what they are meant to, so an empty problem list means something."""
    assert _problem(ROOT, "storage/no_such_module.py") == "no such file"
    assert _problem(ROOT, "storage/log/commitlog.py") is None
    assert _problem(ROOT, "services/<name>/openapi.py") is None
    assert REPOSITORY_PATH.findall("see `<store>/commitlog/x` and ./data/y") == []
    assert MISSING_DOCUMENTS.search("as in " + "ARCHITECTURE")
    assert MISSING_DOCUMENTS.search("see docs/architecture.md") is None
