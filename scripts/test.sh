#!/usr/bin/env bash
# Every test, as CI runs it: set up, lint, type-check, check the layers, run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
echo "== ruff";        .venv/bin/ruff check .
echo "== mypy";        .venv/bin/mypy -p mqstore.storage -p mqstore.services -p mqstore.client -p mqstore.pipeline
echo "== layers";      .venv/bin/lint-imports
echo "== pytest";      .venv/bin/pytest "$@"
