from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _quick_upstream(fast_upstream: None) -> None:
    pass
