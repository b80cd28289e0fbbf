"""Fixtures of the engine tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture
def one_thread() -> Iterator[None]:
    """The ranks compute with ``compute.threads`` = 1; so must the in-process sim reference."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
