"""Horovod over NCCL where Horovod was built with it; its CPU path, said once, where not."""

from __future__ import annotations

import torch

from psml_core.engine.horovod.backend import nccl_device


class _FakeHorovod:
    def __init__(self, nccl: bool) -> None:
        self._nccl = nccl

    def nccl_built(self) -> int:
        return int(self._nccl)


def test_a_gpu_rank_uses_nccl_where_horovod_has_it(capsys):
    gpu = torch.device("cuda", 1)  # a device object: no GPU is touched
    assert nccl_device(_FakeHorovod(True), gpu) == gpu
    assert capsys.readouterr().err == ""


def test_without_nccl_a_gpu_rank_says_why_once(capsys):
    assert nccl_device(_FakeHorovod(False), torch.device("cuda", 0)) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "built without NCCL" in err and "CPU path" in err


def test_a_cpu_rank_uses_the_cpu_path_silently(capsys):
    assert nccl_device(_FakeHorovod(True), torch.device("cpu")) is None
    assert capsys.readouterr().err == ""
