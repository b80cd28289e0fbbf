"""Fixtures of the workflow tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from wf_helpers import copy_workflow


@pytest.fixture()
def workflow_copy(tmp_path: Path) -> Path:
    return copy_workflow(tmp_path / "wf")
