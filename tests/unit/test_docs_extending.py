"""docs/extending.md's worked example runs as written: its toy codec registers, its recipe
passes the registry check, and a smoke-tier run trains with it on the sim backend.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from psml_core.codecs import CODECS, CodecContext
from psml_core.config import MethodRecipe, build
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, build_job
from psml_core.recipes import check_recipe

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


@pytest.fixture
def first_k():
    """Run the guide's Python block; take its codec out of the registry afterwards."""
    (code,) = blocks("python")
    namespace: dict[str, object] = {}
    exec(compile(code, str(GUIDE), "exec"), namespace)  # noqa: S102 - our own docs
    try:
        yield namespace["FirstKCodec"]
    finally:
        CODECS._items.pop("first_k", None)  # noqa: SLF001 - undo the guide's registration


def test_the_toy_codec_is_exact_and_rejects_a_wrong_length(first_k) -> None:
    codec, ctx = first_k(ratio=0.3), CodecContext()
    x = np.random.default_rng(0).standard_normal(101).astype(np.float32)
    payload = codec.encode(x, ctx)
    k = math.ceil(0.3 * 101)
    assert payload.wire_bytes == 4 * k
    expected = np.zeros_like(x)
    expected[:k] = x[:k]
    np.testing.assert_array_equal(codec.decode(payload, ctx), expected)
    with pytest.raises(ValueError, match="first_k payload"):
        codec.decode(dataclasses.replace(payload, buffer=payload.buffer[:-4]), ctx)


def test_the_guides_recipe_trains_a_smoke_run(first_k, smoke, prepared) -> None:
    (text,) = blocks("yaml")
    ((name, raw),) = yaml.safe_load(text).items()
    recipe = build(MethodRecipe, {"name": name, **raw}, name)
    check_recipe(recipe, "docs/extending.md")  # name registered, params build the codec
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    spec = dataclasses.replace(
        run,
        method=recipe,
        workload=dataclasses.replace(run.workload, iterations=6),
        compute=dataclasses.replace(run.compute, codec_costs=False),  # no calibrated table
    )
    ds = load_prepared(prepared["digits"])
    job = build_job(spec, ds)
    records = SimBackend().run(job)
    dense = SimBackend().run(build_job(dataclasses.replace(spec, method=run.method), ds))
    assert len(records) == len(dense) and all(np.isfinite(r.loss) for r in records)
    # Each push carries ceil(n_s / 2) of a shard's n_s values: about half the dense push.
    keys = [len(k) for k in job.workers[0].shard_keys]
    payload = sum(4 * math.ceil(0.5 * n) for n in keys)
    dense_payload = sum(4 * n for n in keys)
    up = records[0].bytes_up - dense[0].bytes_up
    assert up == payload - dense_payload
