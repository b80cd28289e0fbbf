"""The report's setup tables: the tier, its data sets, workloads, scenarios, devices, methods."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psml_core.report.format import (
    DASH,
    fmt_bandwidth,
    fmt_bytes,
    fmt_percent,
    fmt_seconds,
    fmt_stat,
    fmt_value,
    missing,
)
from psml_core.report.tables import Table, kv_table

__all__ = [
    "compute_table",
    "datasets_table",
    "HIDDEN_MODELS",
    "general_table",
    "method_entries",
    "methods_table",
    "scenarios_table",
    "sparsity_table",
    "workloads_table",
]

_SPARSITY_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Rows", ("rows",)),
    ("Features", ("features",)),
    ("nnz/row mean", ("nnz_per_row", "mean")),
    ("median", ("nnz_per_row", "median")),
    ("p90", ("nnz_per_row", "p90")),
    ("max", ("nnz_per_row", "max")),
    ("Density", ("density",)),
    ("Zipf exponent", ("popularity", "zipf_exponent")),
)


_WORKLOAD_COLUMNS: tuple[tuple[str, str], ...] = (
    ("dataset", "Dataset"),
    ("model", "Model"),
    ("hidden", "Hidden"),
    ("workers", "Workers"),
    ("batch_size", "Batch"),
    ("lr", "LR"),
    ("momentum", "Mom."),
    ("l2", "L2"),
    ("iterations", "Steps"),
    ("eval_every", "Eval"),
    ("target_accuracy", "Target"),
)


HIDDEN_MODELS = frozenset({"mlp", "cnn", "sparse_mlp"})
"""The models whose size ``workloads.<name>.hidden`` sets; the others ignore it (logreg,
resnet18), so their row shows – rather than the schema's default width."""


def _seeds_by_experiment(experiment: Mapping[str, Any]) -> str:
    """The seeds each experiment runs (its own list, else the tier's), grouped, most first."""
    default = tuple(experiment.get("seeds") or ())
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, ex in sorted((experiment.get("experiments") or {}).items()):
        groups.setdefault(tuple((ex or {}).get("seeds") or default), []).append(str(name))
    if not groups:
        return fmt_value(list(default))
    order = sorted(groups.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    return "; ".join(f"{fmt_value(list(s))} ({', '.join(names)})" for s, names in order)


def _methods_in_use(experiment: Mapping[str, Any]) -> str:
    """The tier's method list, or (each experiment naming its own) how many recipes run where."""
    if experiment.get("methods"):
        return fmt_value(experiment.get("methods"))
    recipes, experiments = experiment.get("recipes") or {}, experiment.get("experiments") or {}
    if not recipes:
        return DASH
    return f"{len(recipes)} recipes over {len(experiments)} experiments (the recipe table)"


def general_table(experiment: Mapping[str, Any]) -> Table:
    """Tier-wide settings: backend, seeds per experiment, default workers and shards, methods.

    Seeds are listed per experiment (an experiment may set its own); workers and shards are the
    tier's defaults, which a workload may override (the workloads table gives each its own).
    """
    colocated = experiment.get("colocated")
    coloc = (
        DASH
        if colocated is None
        else "yes: shard s runs on the machine of worker s"
        if colocated
        else "no: every shard on a dedicated server machine"
    )
    pairs = [
        ("Tier", fmt_value(experiment.get("tier"))),
        ("Backend", fmt_value(experiment.get("backend"))),
        ("Seeds (experiments)", _seeds_by_experiment(experiment)),
        (
            "Workers (default)",
            f"{fmt_value(experiment.get('workers'))}; a workload may set "
            "its own (the workloads table)",
        ),
        ("Parameter-server shards (default)", fmt_value(experiment.get("shards"))),
        ("Colocated shards", coloc),
        ("Methods", _methods_in_use(experiment)),
    ]
    return kv_table("general", "Experiment settings.", pairs, ["Setting", "Value"])


_DATASET_SKIP = ("name", "source")


def datasets_table(experiment: Mapping[str, Any]) -> Table:
    """Datasets, their generation parameters and the workloads that use them."""
    datasets = experiment.get("datasets") or {}
    workloads = experiment.get("workloads") or {}
    rows = []
    for name in sorted(datasets):
        spec = datasets[name] or {}
        params = {k: v for k, v in spec.items() if k not in _DATASET_SKIP and not missing(v)}
        users = sorted(w for w, wl in workloads.items() if (wl or {}).get("dataset") == name)
        rows.append([name, fmt_value(spec.get("source")), fmt_value(params), fmt_value(users)])
    return Table(
        "datasets",
        "Datasets and their parameters (– where a dataset has no parameters or no workload).",
        ["Dataset", "Source", "Parameters", "Used by"],
        rows or [[DASH] * 4],
        # "Used by" lists many workloads: a flexible column, or it squeezes Parameters to nothing.
        widths=["auto", "auto", 1, 1],
    )


def _dig(obj: Any, path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return None
        obj = obj[key]
    return obj


def sparsity_table(stats: Mapping[str, Mapping[str, Any]]) -> Table:
    """Headline sparsity statistics per dataset (other keys of the files are left out)."""
    rows = []
    for name in sorted(stats):
        cells = [name]
        for _, path in _SPARSITY_COLUMNS:
            v = _dig(stats[name], path)
            cells.append(fmt_stat(v))
        rows.append(cells)
    return Table(
        "sparsity",
        "Sparsity of the training data: non-zeros per row, density (non-zeros / (rows × "
        "features)) and the fitted Zipf exponent of feature popularity (– where the statistics "
        "file does not report a value).",
        ["Dataset", *(c for c, _ in _SPARSITY_COLUMNS)],
        rows,
        align=["left", *(["right"] * len(_SPARSITY_COLUMNS))],
    )


def workloads_table(experiment: Mapping[str, Any]) -> Table:
    """Workloads with their model and training hyper-parameters."""
    workloads = experiment.get("workloads") or {}
    rows = []
    for name in sorted(workloads):
        spec = workloads[name] or {}
        cells = [name]
        for key, _ in _WORKLOAD_COLUMNS:
            v = spec.get(key)
            if key == "hidden" and (not v or spec.get("model") not in HIDDEN_MODELS):
                cells.append(DASH)  # e.g. a linear model: no hidden layers
            elif key == "hidden":
                cells.append("/".join(str(h) for h in v))  # one unbreakable token per model
            elif key == "workers":
                cells.append(fmt_value(v if v is not None else experiment.get("workers")))
            elif key == "target_accuracy":
                cells.append(fmt_percent(v))
            else:
                cells.append(fmt_value(v))
        rows.append(cells)
    return Table(
        "workloads",
        "Workloads: model and training hyper-parameters (Hidden: an MLP's layer widths; a "
        "CNN's convolution channels, then its dense units; a sparse MLP's embedding width, "
        "then its layer widths; batch size per worker; learning rate and momentum (Mom.) of the "
        "server-side SGD step; Steps: iterations; Eval: iterations between evaluations; Target: "
        "the test accuracy a time to target is measured at; – where a parameter does not "
        "apply).",
        ["Workload", *(title for _, title in _WORKLOAD_COLUMNS)],
        rows or [[DASH] * (len(_WORKLOAD_COLUMNS) + 1)],
        align=["left", "left", "left", *(["right"] * (len(_WORKLOAD_COLUMNS) - 2))],
    )


def scenarios_table(experiment: Mapping[str, Any]) -> Table:
    """Network scenarios: bandwidth, latency, overhead, header bytes and wire efficiency."""
    scenarios = experiment.get("scenarios") or {}
    rows = []
    for name in sorted(scenarios):
        s = scenarios[name] or {}
        lat = s.get("latency_us")
        ovh = s.get("message_overhead_us")
        win = s.get("rate_window")
        span = None if missing(lat) or missing(win) else float(win) * float(lat) * 1e-6
        window = DASH if span is None else "exact" if span == 0 else fmt_seconds(span)
        rows.append(
            [
                name,
                fmt_bandwidth(s.get("bandwidth_gbps")),
                DASH if missing(lat) else fmt_seconds(float(lat) * 1e-6),
                DASH if missing(ovh) else fmt_seconds(float(ovh) * 1e-6),
                fmt_bytes(s.get("header_bytes")),
                _efficiency(s.get("wire_efficiency")),
                window,
                fmt_value(s.get("description")),
            ]
        )
    return Table(
        "scenarios",
        "Network scenarios: NIC bandwidth per direction, one-way latency, per-message software "
        "overhead, header bytes per message, wire efficiency (payload per byte of the link's "
        "rate: 96.5% is TCP/IPv4 at MTU 1500, 1448 payload bytes per 1500-byte packet; a "
        "message holds the link for its bytes divided by it, and is recorded with its bytes) "
        "and the rate window: on the sim backend the NICs' fair shares are recomputed at most "
        "once per window while messages are in flight, so a message's start or end reaches the "
        "other flows' rates at most that late (exact: at every change). – where the scenario "
        "leaves a value unset.",
        [
            "Scenario",
            "Bandwidth",
            "Latency",
            "Overhead",
            "Header",
            "Wire eff.",
            "Rate window",
            "Description",
        ],
        rows or [[DASH] * 8],
        align=["left", "right", "right", "right", "right", "right", "right", "left"],
        widths=["auto", "auto", "auto", "auto", "auto", "auto", "auto", 1],
        breakable=True,  # long descriptions: a tier with many scenarios runs past a page
    )


def _efficiency(value: Any) -> str:
    """A wire efficiency as a percentage with one decimal (96.5%)."""
    return DASH if missing(value) else f"{100 * float(value):.1f}%"


# The compute table's labels for the two settings once both called "device" (issue 47).
TORCH_DEVICE = "torch device"
COST_PROFILE = "cost profile (simulated clock)"


def compute_table(experiment: Mapping[str, Any]) -> Table:
    """The compute-time model's settings, the torch device and the cost profile each apart.

    A configuration written before issue 47 names both ``device`` (the top-level key, and
    compute's and each workload's); both names are read.
    """
    compute = dict(experiment.get("compute") or {})
    if "cost_profile" not in compute and "device" in compute:
        compute["cost_profile"] = compute.pop("device")
    torch_device = experiment.get("torch_device", experiment.get("device"))
    pairs = [(TORCH_DEVICE, fmt_value(torch_device if torch_device else "cpu"))]
    if "cost_profile" in compute:  # beside the torch device, so that the two read apart
        pairs.append((COST_PROFILE, fmt_value(compute["cost_profile"])))
    pairs += [
        (str(k), fmt_value(compute[k], str(k))) for k in sorted(compute) if k != "cost_profile"
    ]
    # A workload may name the hardware class its paper trained on: its runs use that profile.
    own: dict[str, list[str]] = {}
    for name, wl in sorted((experiment.get("workloads") or {}).items()):
        profile = (wl or {}).get("cost_profile", (wl or {}).get("device"))
        if profile and profile != compute.get("cost_profile"):
            own.setdefault(str(profile), []).append(str(name))
    pairs += [(f"{COST_PROFILE} of {', '.join(names)}", p) for p, names in sorted(own.items())]
    return kv_table(
        "compute",
        "Compute-time model: the torch device the models' tensors live on (real hardware; "
        "on the sim backend it does not enter the simulated clock), the tier's settings, and "
        "the cost profile (config/devices/<name>.yaml) the simulated clock charges, with that "
        "of each workload that names its own (the hardware class its paper trained on).",
        pairs,
        ["Setting", "Value"],
    )


def _block(spec: Any) -> str:
    """A building block as ``name(k=v, ...)``; accepts a name or a ``{name, params}`` mapping."""
    if missing(spec):
        return DASH
    if not isinstance(spec, Mapping):
        return str(spec)
    if "name" not in spec:  # a settings mapping without a registry name (hashing: {ratio})
        set_ = {k: v for k, v in spec.items() if not missing(v)}
        return ", ".join(f"{k}={fmt_value(set_[k], str(k))}" for k in sorted(set_)) or DASH
    params = spec.get("params") or {}
    inner = ", ".join(f"{k}={fmt_value(params[k], str(k))}" for k in sorted(params))
    name = str(spec.get("name", DASH))
    return f"{name}({inner})" if inner else name


_BLOCKS = ("codec", "codec_down", "sync", "controller", "placement", "pull", "lossless", "hashing")


def method_entries(experiment: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each recipe as ``{name, role, paper, plugin, description, blocks, deviations}``.

    Methods come in the configured order, then any other recipe by name. ``plugin`` is
    ``"plugin: <package> <version>"`` for a recipe that comes from or uses a plugin package
    (the effective configuration's ``plugins``), else empty.
    """
    recipes = experiment.get("recipes") or {}
    plugins = experiment.get("plugins") or {}
    order = [m for m in experiment.get("methods") or [] if m in recipes]
    order += sorted(m for m in recipes if m not in order)
    out = []
    for name in order:
        r = recipes[name] or {}
        blocks = [[b, _block(r.get(b))] for b in _BLOCKS if b in r and not missing(r.get(b))]
        blocks = [pair for pair in blocks if pair[1] != DASH]
        out.append(
            {
                "name": name,
                "role": fmt_value(r.get("role")),
                "paper": fmt_value(r.get("paper")),
                "plugin": "; ".join(f"plugin: {label}" for label in plugins.get(name) or []),
                "description": fmt_value(r.get("description")),
                "blocks": blocks,
                "deviations": [str(d) for d in r.get("deviations") or []],
            }
        )
    return out


_DEFAULT_BLOCKS = {
    "controller": "static", "placement": "range", "pull": "params", "lossless": "none"
}  # fmt: skip


def methods_table(experiment: Mapping[str, Any]) -> Table:
    """Appendix A: every recipe in use, one short row each.

    What each recipe does and its deviations go to the attached methods table.
    """
    rows = []
    for m in method_entries(experiment):
        n = len(m["deviations"])
        who = m["role"] + (f", {m['paper']}" if m["paper"] != DASH else "")
        who += f" ({m['plugin']})" if m["plugin"] else ""
        blocks = [f"{b}: {v}" for b, v in m["blocks"] if _DEFAULT_BLOCKS.get(b) != v]
        rows.append([m["name"], who, " · ".join(blocks) or DASH, str(n)])
    return Table(
        "methods",
        "Every recipe in use: its role and paper, its building blocks (codec, sync policy, "
        "controller, placement, pull, lossless stage, feature hashing; the defaults, the static "
        "controller, the range placement, the parameter pull and no lossless stage, are not "
        "repeated; a recipe from or with a package outside psml names it as "
        "“plugin: package version”) and how many deviations from the paper's setup it "
        "declares. What "
        "each recipe does and each deviation (our design choice) are in the attached methods "
        "table.",
        ["Recipe", "Role", "Blocks", "Deviations"],
        rows or [[DASH] * 4],
        align=["left", "left", "left", "right"],
        widths=["auto", "auto", 1, "auto"],
        breakable=True,
    )
