"""Fixtures of the method tests: every run computes on one thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """One compute thread, as the dist ranks use (``compute.threads: 1``).

    Sim runs that are compared bit for bit with dist runs must use the same thread count, and
    tiny models run several times faster on one thread than on many.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
