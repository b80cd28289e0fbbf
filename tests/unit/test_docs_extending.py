"""docs/extending.md's example plugin runs as written, in-process.

Its codec is exact and refuses a wrong length; with the codec registered as its entry point
would register it, its recipe and paper file load, `psml bench calibrate --plugin` gives it a
cost table, and a smoke-tier run trains with it on the sim backend with codec costs charged
(the path a user takes). tests/workflow/test_workflow_plugin.py installs the same files with
pip and runs the workflow.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from psml_core import plugins
from psml_core.analysis.claims import load_papers
from psml_core.codecs import CODECS, CodecContext
from psml_core.config import MethodRecipe, build
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.recipes import check_recipe

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "extending.md"


def guide_files() -> dict[str, str]:
    """The example package's files: a fenced block whose info string names its path."""
    text = GUIDE.read_text(encoding="utf-8")
    return dict(re.findall(r"```\w+ (psml-firstk/\S+)\n(.*?)```", text, re.S))


def write_package(dest: Path) -> Path:
    """The example package as a reader copies it; its root."""
    for rel, body in guide_files().items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(body, encoding="utf-8")
    return dest / "psml-firstk"


def test_the_guide_leads_with_the_plugin_package() -> None:
    files = guide_files()
    assert set(files) == {
        "psml-firstk/pyproject.toml",
        "psml-firstk/psml_firstk/__init__.py",
        "psml-firstk/psml_firstk/codec.py",
        "psml-firstk/psml_firstk/methods.yaml",
        "psml-firstk/psml_firstk/papers/firstk.yaml",
    }
    text = GUIDE.read_text(encoding="utf-8")
    assert text.index("psml-firstk/pyproject.toml") < text.index("## Inside psml's tree")


@pytest.fixture
def first_k(tmp_path, monkeypatch):
    """The guide's package, its codec registered as its entry point would register it."""
    root = write_package(tmp_path)
    namespace: dict[str, object] = {}
    code = (root / "psml_firstk" / "codec.py").read_text()
    exec(compile(code, "psml_firstk/codec.py", "exec"), namespace)  # noqa: S102 - our own docs
    cls = namespace["FirstKCodec"]
    CODECS.register("first_k")(cls)
    plugin = plugins.Plugin("psml-firstk", "0.1.0", blocks={"codec": ["first_k"]})
    plugin.methods = [root / "psml_firstk" / "methods.yaml"]
    plugin.recipes = ["first_half"]
    plugin.papers = [root / "psml_firstk" / "papers" / "firstk.yaml"]
    monkeypatch.setattr(plugins, "_LOADED", {"psml-firstk": plugin})
    monkeypatch.setenv(plugins.COSTS_ENV, str(tmp_path / "costs"))
    try:
        yield cls, root
    finally:
        CODECS._items.pop("first_k", None)  # noqa: SLF001 - undo the registration


def test_the_toy_codec_is_exact_and_rejects_a_wrong_length(first_k) -> None:
    cls, _root = first_k
    codec, ctx = cls(ratio=0.3), CodecContext()
    x = np.random.default_rng(0).standard_normal(101).astype(np.float32)
    payload = codec.encode(x, ctx)
    k = math.ceil(0.3 * 101)
    assert payload.wire_bytes == 4 * k
    expected = np.zeros_like(x)
    expected[:k] = x[:k]
    np.testing.assert_array_equal(codec.decode(payload, ctx), expected)
    with pytest.raises(ValueError, match="first_k payload"):
        codec.decode(dataclasses.replace(payload, buffer=payload.buffer[:-4]), ctx)


def test_the_guides_recipe_and_paper_load(first_k) -> None:
    _cls, root = first_k
    raw = yaml.safe_load((root / "psml_firstk" / "methods.yaml").read_text())
    ((name, spec),) = raw.items()
    recipe = build(MethodRecipe, {"name": name, **spec}, name)
    check_recipe(recipe, "psml_firstk/methods.yaml")  # name registered, params build the codec
    papers = load_papers(REPO / "config" / "papers", plugins.paper_files())
    assert papers["firstk"]["claims"][0]["measure"]["method"] == "first_half"
    assert plugins.recipe_labels({name: recipe}) == {name: ["psml-firstk 0.1.0"]}


def test_the_guides_recipe_trains_a_smoke_run_with_codec_costs(first_k, smoke, prepared) -> None:
    from psml_core.bench import calibrate as cal
    from psml_core.bench.plugin_costs import calibrate_plugin_codecs
    from psml_core.errors import ConfigError

    _cls, root = first_k
    raw = yaml.safe_load((root / "psml_firstk" / "methods.yaml").read_text())
    recipe = build(MethodRecipe, {"name": "first_half", **raw["first_half"]}, "first_half")
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    spec = dataclasses.replace(
        run, method=recipe, workload=dataclasses.replace(run.workload, iterations=6)
    )
    assert spec.compute.codec_costs  # charged, as a user's run is
    ds = load_prepared(prepared["digits"])
    with pytest.raises(ConfigError, match=r"psml bench calibrate --plugin first_k"):
        SimBackend().run(staged_job(spec, ds))
    q = cal.QUICK
    (path,) = calibrate_plugin_codecs(
        ["first_k"],
        command="psml bench calibrate --plugin first_k --quick",
        sizes=q.sizes,
        ratios=q.ratios,
        repeats=q.repeats,
        min_time=q.min_time,
        quick=True,
    )
    assert path == root.parent / "costs" / "first_k.yaml"
    job = staged_job(spec, ds)
    records = SimBackend().run(job)
    dense = SimBackend().run(staged_job(dataclasses.replace(spec, method=run.method), ds))
    assert len(records) == len(dense) and all(np.isfinite(r.loss) for r in records)
    assert any(r.codec_s > 0 for r in records)  # the plugin codec's work is on the clock
    # Each push carries ceil(n_s / 2) of a shard's n_s values: about half the dense push.
    keys = [len(k) for k in job.workers[0].shard_keys]
    payload = sum(4 * math.ceil(0.5 * n) for n in keys)
    dense_payload = sum(4 * n for n in keys)
    assert records[0].bytes_up - dense[0].bytes_up == payload - dense_payload
