"""A placement is named by what it depends on, and shared by the recipes that place alike."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

from psml_core.data.hashing import hashed_once
from psml_core.data.store import load_prepared
from psml_core.engine.job import placement_problem
from psml_core.models import make_model
from psml_core.placement import PLACEMENTS


def _groups(exp):
    groups = defaultdict(list)
    for w, m in sorted({(w, m) for w, m, _s, _seed in exp.grid()}):
        groups[(w, exp.placement_run(w, m).placement_key())].append(m)
    return groups


def test_the_smoke_tier_places_its_28_pairs_in_7_placements(smoke):
    groups = _groups(smoke)
    assert sum(map(len, groups.values())) == 28
    assert len(groups) == 7
    # Recipes that differ in their placement block never share one.
    for (_w, key), methods in groups.items():
        names = {repr(smoke.placement_run(_w, m).method.placement) for m in methods}
        assert len(names) == 1, (key, methods)


def test_what_a_placement_reads_moves_the_key_and_nothing_else_does(smoke):
    spec = smoke.placement_run("digits_mlp", "dense_bsp")
    key = spec.placement_key()
    assert key.startswith(f"{spec.method.placement.name}-")
    # Not the codec, the sync policy, the scenario, the learning rate or the run's id.
    other = smoke.placement_run("digits_mlp", "topk_ef")
    assert other.method.codec != spec.method.codec and other.placement_key() == key
    lr = dataclasses.replace(spec.workload, lr=spec.workload.lr * 2)
    assert dataclasses.replace(spec, workload=lr, run_id="x").placement_key() == key
    # The layout, the seed, the batch size and the placement's settings do.
    assert dataclasses.replace(spec, workers=spec.workers + 1).placement_key() != key
    assert dataclasses.replace(spec, seed=spec.seed + 1).placement_key() != key
    batch = dataclasses.replace(spec.workload, batch_size=spec.workload.batch_size + 1)
    assert dataclasses.replace(spec, workload=batch).placement_key() != key
    jpdc = smoke.placement_run("rcv1_logreg", "jpdc")
    moved = dataclasses.replace(jpdc.method, placement=spec.method.placement)
    assert dataclasses.replace(jpdc, method=moved).placement_key() != jpdc.placement_key()


def test_recipes_that_share_a_key_get_the_same_assignment(smoke, prepared):
    """Differential: each recipe of a shared key placed on its own, assignments identical."""
    for (w, _key), methods in _groups(smoke).items():
        if len(methods) < 2 or w == "rcv1_logreg" and len(methods) > 2:
            continue
        out = []
        for m in methods[:3]:
            spec = smoke.placement_run(w, m)
            ds = hashed_once(
                load_prepared(prepared[spec.dataset.name]), spec.method.hashing, spec.seed, "x"
            )
            model = make_model(spec.workload, ds.n_features, ds.n_classes)
            placement = PLACEMENTS.build(spec.method.placement)
            problem = placement_problem(model, placement, ds, spec.seed)
            a = placement.assign(problem, spec.workers, spec.shards)
            out.append((a.sample_owner, a.key_owner))
        for sample_owner, key_owner in out[1:]:
            assert np.array_equal(sample_owner, out[0][0])
            assert np.array_equal(key_owner, out[0][1])


def test_a_shared_placement_has_one_spec_whichever_recipe_asks(smoke):
    """A recipe joining or leaving a group must not rewrite its spec (and re-run its training)."""
    from psml_core.recipes import read_run_spec

    for (w, key), methods in _groups(smoke).items():
        texts = {smoke.placement_spec(w, m).to_json() for m in methods}
        assert len(texts) == 1, (w, key, methods)
        spec = read_run_spec(texts.pop())  # a valid --run, checked as psml partition checks it
        assert spec.run_id == f"{w}/{key}" and spec.placement_key() == key
        assert spec.method.placement == smoke.placement_run(w, methods[0]).method.placement
