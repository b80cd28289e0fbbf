"""The setup tables say what each run used, not only the tier's defaults."""

from __future__ import annotations

from psml_core.report.tables_setup import general_table, workloads_table

EXPERIMENT = {
    "tier": "t",
    "backend": "sim",
    "seeds": [0, 1, 2],
    "workers": 8,
    "shards": 8,
    "experiments": {"a": {"seeds": [0, 1, 2, 3, 4]}, "b": {}, "c": {"seeds": [0]}},
    "workloads": {
        "cnn": {"dataset": "d", "model": "cnn", "hidden": [16, 32, 720], "workers": 4},
        "lin": {"dataset": "d", "model": "logreg", "hidden": []},
    },
}


def test_seeds_are_given_per_experiment_and_workers_as_the_default() -> None:
    rows = dict(general_table(EXPERIMENT).rows)
    assert rows["Seeds (experiments)"] == "0, 1, 2, 3, 4 (a); 0, 1, 2 (b); 0 (c)"
    assert rows["Workers (default)"].startswith("8;")
    recipes = {"m": {}, "n": {}}
    assert dict(general_table({**EXPERIMENT, "recipes": recipes}).rows)["Methods"] == (
        "2 recipes over 3 experiments (the recipe table)"
    )


def test_each_workload_shows_its_own_workers_and_any_models_hidden_sizes() -> None:
    table = workloads_table(EXPERIMENT)
    col = {title: i for i, title in enumerate(table.header)}
    cnn, lin = table.rows
    assert cnn[col["Hidden"]] == "16/32/720" and cnn[col["Workers"]] == "4"
    assert lin[col["Hidden"]] == "–" and lin[col["Workers"]] == "8"


def test_the_recipe_table_names_hashing_pull_and_lossless_but_not_defaults() -> None:
    from psml_core.report.tables_setup import methods_table

    recipes = {
        "jpdc": {"role": "method", "codec": {"name": "kv"}, "pull": "touched",
                 "lossless": "snappy", "hashing": {"ratio": 0.0625, "buckets": None}},
        "plain": {"role": "baseline", "codec": {"name": "dense"}, "pull": "params",
                  "lossless": "none", "hashing": None},
        "dfs": {"role": "method", "codec": {"name": "dfs"}, "pull": "aggregate"},
    }  # fmt: skip
    rows = {r[0]: r[2] for r in methods_table({"recipes": recipes}).rows}
    assert rows["jpdc"] == "codec: kv · pull: touched · lossless: snappy · hashing: ratio=0.0625"
    assert rows["plain"] == "codec: dense"
    assert rows["dfs"] == "codec: dfs · pull: aggregate"


def test_a_model_that_ignores_hidden_shows_a_dash_not_the_default_width() -> None:
    """The schema's default ``hidden: [64]`` reaches every workload; logreg has no such layer."""
    experiment = {
        "workers": 2,
        "workloads": {
            "lin": {"dataset": "d", "model": "logreg", "hidden": [64]},
            "mlp": {"dataset": "d", "model": "mlp", "hidden": [64]},
        },
    }
    table = workloads_table(experiment)
    hidden = {row[0]: row[table.header.index("Hidden")] for row in table.rows}
    assert hidden == {"lin": "–", "mlp": "64"}


# Input sizes each model can be built on (a CNN needs square images, ResNet-18 CIFAR's).
_FEATURES = {"cnn": 64, "resnet18": 3 * 32 * 32}
_HIDDEN = {"cnn": ((4, 8, 16), (4, 8, 32))}


def test_hidden_models_are_those_whose_size_hidden_sets() -> None:
    """:data:`HIDDEN_MODELS` against the registry: a model is in it iff ``hidden`` changes it."""
    from psml_core.config import WorkloadSpec
    from psml_core.models import MODELS
    from psml_core.report.tables_setup import HIDDEN_MODELS

    sized = set()
    for name in MODELS.names():
        counts = set()
        for hidden in _HIDDEN.get(name, ((8,), (16,))):
            spec = WorkloadSpec("w", "d", name, 8, 0.1, 1, hidden=hidden)
            counts.add(MODELS.get(name)(_FEATURES.get(name, 20), 3, spec).n_params)
        if len(counts) > 1:
            sized.add(name)
    assert sized == set(HIDDEN_MODELS)


def test_the_compute_table_tells_the_torch_device_from_the_cost_profile() -> None:
    """Issue 47: two settings once both called device; a config from before it still reads."""
    from psml_core.report.tables_setup import COST_PROFILE, TORCH_DEVICE, compute_table

    new = {
        "torch_device": "cuda",
        "compute": {"model": "profile", "cost_profile": "cpu-core", "threads": 1},
        "workloads": {"a": {"cost_profile": "v100"}, "b": {"cost_profile": "cpu-core"}, "c": {}},
    }
    rows = compute_table(new).rows
    assert rows[:2] == [[TORCH_DEVICE, "cuda"], [COST_PROFILE, "cpu-core"]]
    assert [f"{COST_PROFILE} of a", "v100"] in rows and len(rows) == 5  # b's is the tier's
    assert "device" not in {r[0] for r in rows} and "cost_profile" not in {r[0] for r in rows}
    old = {
        "device": "cuda",
        "compute": {"model": "profile", "device": "cpu-core", "threads": 1},
        "workloads": {"a": {"device": "v100"}, "b": {"device": "cpu-core"}, "c": {}},
    }
    assert compute_table(old).rows == rows
    assert compute_table({}).rows[0] == [TORCH_DEVICE, "cpu"]  # the schema's default
