from __future__ import annotations

import pytest

from mqstore.operator.quantity import QuantityError, quantity_bytes


@pytest.mark.parametrize(("text", "expected"), [
    ("0", 0), ("1024", 1024), ("1Ki", 1024), ("50Gi", 50 << 30), ("1.5Gi", 3 << 29),
    ("1k", 1000), ("2G", 2 * 10**9), ("1Ti", 1 << 40), (".5Ki", 512), ("1.0001k", 1001),
])
def test_quantities(text: str, expected: int) -> None:
    assert quantity_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "Gi", "10 Gi", "-1Gi", "1e3", "100m", "1GB", "1gi"])
def test_what_is_not_a_storage_quantity(text: str) -> None:
    with pytest.raises(QuantityError, match="not a storage quantity"):
        quantity_bytes(text)
