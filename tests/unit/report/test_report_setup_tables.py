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
