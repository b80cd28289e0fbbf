"""Invalid configurations (issue 7): one clear error line, a non-zero exit, nothing written.

Property tests mutate a valid input at one place — a wrongly typed value, a value out of range
(negative sizes, ratios outside (0, 1], NaN), a value no enum allows, an unknown key, an unknown
method / workload / scenario / dataset name, an empty method list — and run the command a user
runs on it: ``psml config`` for the config and for config/methods.yaml, ``psml train --run``
for a run's JSON. The places and their constraints are read from the JSON schemas, so a key
added there is fuzzed too. Each mutation knows the key the message must name.

Every command runs in-process (``psml_core.cli.main``) in a fresh working directory that must
stay as it was; two subprocess checks cover the exit code and the absence of a traceback.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import string
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psml_core.backend_info import BACKEND_INFOS
from psml_core.cli import main
from psml_core.config import effective_config
from psml_core.recipes import load_experiment, load_methods

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "workflow" / "schemas"

Path_ = tuple[str | int, ...]

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# --------------------------------------------------------------------------- helpers


def _schema(name: str) -> dict[str, Any]:
    return yaml.safe_load((SCHEMAS / f"{name}.schema.yaml").read_text(encoding="utf-8"))


def _key(path: Path_) -> str:
    """A path as error messages write it: ``workloads.digits_mlp.hidden[0]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _files(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its modification time: what "nothing written" compares."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def _set(data: Any, path: Path_, value: Any) -> Any:
    """A deep copy of ``data`` with ``value`` at ``path`` (a new key when absent)."""
    out = json.loads(json.dumps(data))
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


@dataclass(frozen=True)
class Mutation:
    """One invalid value at one place, and what the error message must contain."""

    path: Path_
    value: Any
    expect: str

    def apply(self, data: Any) -> Any:
        """The mutated copy of ``data``."""
        return _set(data, self.path, self.value)


@dataclass(frozen=True)
class Site:
    """A value in the tree with its (resolved) schema."""

    path: Path_
    schema: dict[str, Any]
    value: Any


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _sites(
    value: Any, schema: dict[str, Any], defs: dict[str, Any], path: Path_ = ()
) -> Iterator[Site]:
    """Every node of ``value`` that the schema describes, depth first."""
    node = _resolve(schema, defs)
    yield Site(path, node, value)
    if isinstance(value, dict):
        props, extra = node.get("properties", {}), node.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from _sites(v, sub, defs, (*path, k))
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, v in enumerate(value):
            yield from _sites(v, node["items"], defs, (*path, i))


WORD = st.text(string.ascii_letters, min_size=1, max_size=8)
NEW_KEY = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
FINITE = {"allow_nan": False, "allow_infinity": False}
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _wrong_values(node: dict[str, Any], none: bool) -> list[tuple[str, st.SearchStrategy[Any]]]:
    """Values the schema node rejects: (kind, strategy) pairs."""
    typ, out = node.get("type"), []
    if "enum" in node:
        allowed = node["enum"]
        out.append(("enum", st.one_of(WORD, st.integers()).filter(lambda v: v not in allowed)))
    wrong_type = {
        "integer": st.one_of(WORD, st.booleans(), st.floats(), st.lists(st.integers(), max_size=2)),
        "number": st.one_of(WORD, st.booleans(), NON_FINITE, st.lists(st.floats(0, 1), max_size=2)),
        "string": st.one_of(st.integers(), st.booleans(), st.lists(WORD, max_size=2)),
        "boolean": st.one_of(st.integers(), WORD),
        "array": st.one_of(
            WORD, st.integers(), st.dictionaries(NEW_KEY, st.integers(), max_size=1)
        ),
        "object": st.one_of(WORD, st.integers(), st.lists(st.integers(), max_size=2)),
    }.get(typ)
    if wrong_type is not None:
        out.append(("type", st.one_of(wrong_type, st.none()) if none else wrong_type))
    if typ == "integer" and "minimum" in node:
        out.append(("range", st.integers(max_value=node["minimum"] - 1)))
    if typ == "number":
        if "minimum" in node:
            out.append(("range", st.floats(max_value=node["minimum"], exclude_max=True, **FINITE)))
        if "exclusiveMinimum" in node:
            out.append(("range", st.floats(max_value=node["exclusiveMinimum"], **FINITE)))
        if "maximum" in node:
            out.append(("range", st.floats(min_value=node["maximum"], exclude_min=True, **FINITE)))
        if "exclusiveMaximum" in node:
            out.append(("range", st.floats(min_value=node["exclusiveMaximum"], **FINITE)))
    if typ == "string" and node.get("minLength", 0) >= 1:
        out.append(("range", st.just("")))
    if typ == "array" and node.get("minItems", 0) >= 1:
        out.append(("empty", st.just([])))
    return out


@dataclass(frozen=True)
class Maker:
    """A kind of bad input (``type``, ``range``, ``unknown key``, ...) at one place."""

    kind: str
    path: Path_
    mutations: st.SearchStrategy[Mutation]


def draw_mutation(makers: list[Maker]) -> st.SearchStrategy[Mutation]:
    """A kind of bad input (uniformly, so rare kinds are drawn too), a place, a value."""
    kinds: dict[str, list[st.SearchStrategy[Mutation]]] = {}
    for m in makers:
        kinds.setdefault(m.kind, []).append(m.mutations)
    return (
        st.sampled_from(sorted(kinds))
        .flatmap(lambda k: st.sampled_from(kinds[k]))
        .flatmap(lambda s: s)
    )


def schema_mutations(
    base: Any, schema: dict[str, Any], defs: dict[str, Any], none: bool = True
) -> list[Maker]:
    """Every (kind of invalid value, place) in ``base`` that its schema rejects.

    Args:
        base: A valid document.
        schema: Its schema; ``defs`` the ``$defs`` its references point into.
        none: Whether null is an invalid value (False where null means "unset").
    """
    out: list[Maker] = []
    for site in _sites(base, schema, defs):
        path = site.path
        if path:
            expect = f"key {_key(path)!r}:"
            for kind, values in _wrong_values(site.schema, none):
                out.append(
                    Maker(kind, path, values.map(lambda v, p=path, e=expect: Mutation(p, v, e)))
                )
        if not isinstance(site.value, dict):
            continue
        extra = site.schema.get("additionalProperties")
        taken = {*site.value, *site.schema.get("properties", {}), "name"}
        new_key = NEW_KEY.filter(lambda k, t=taken: k not in t)
        if extra is False:  # a closed mapping: an unknown key
            unknown = st.tuples(new_key, st.integers()).map(
                lambda kv, p=path: Mutation(
                    (*p, kv[0]), kv[1], f"unknown key {kv[0]!r} in {_key(p)!r}"
                )
            )
            out.append(Maker("unknown key", path, unknown))
        elif isinstance(extra, dict):  # a mapping of named entries: an invalid new entry
            entry = st.tuples(new_key, st.one_of(st.integers(), WORD, st.just({}))).map(
                lambda kv, p=path: Mutation((*p, kv[0]), kv[1], f"key {_key((*p, kv[0]))!r}:")
            )
            out.append(Maker("new entry", path, entry))
    return out


def unknown_names(paths: dict[Path_, set[str]]) -> list[Maker]:
    """A name that must refer to a defined entry, replaced by one nothing defines."""
    return [
        Maker(
            "unknown name",
            path,
            WORD.filter(lambda v, k=known: v not in k).map(
                lambda v, p=path: Mutation(p, v, f"key {_key(p)!r}: unknown")
            ),
        )
        for path, known in paths.items()
    ]


def _run_cli(
    argv: list[str], cwd: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``psml ARGV`` in-process, in ``cwd``; return (exit code, stdout, stderr)."""
    capsys.readouterr()
    with contextlib.chdir(cwd):
        rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_clear_error(rc: int, out: str, err: str, command: str, expect: str) -> None:
    """Exit 2, nothing on stdout, one stderr line naming the key, no traceback."""
    lines = err.splitlines()
    assert rc == 2, (rc, err)
    assert out == "", out
    assert len(lines) == 1, err
    assert lines[0].startswith(f"psml {command}: error: invalid "), err
    assert expect in lines[0], (expect, err)
    assert "Traceback" not in err


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of config/ (others may edit the real one while this runs)."""
    root = tmp_path_factory.mktemp("cfg") / "config"
    shutil.copytree(REPO / "config", root)
    return root


@pytest.fixture(scope="module")
def smoke_config(config_dir: Path) -> dict[str, Any]:
    """The smoke tier's effective configuration: the valid document the mutations start from."""
    return effective_config({"tier": "smoke"}, config_dir)


def _config_makers(config: dict[str, Any], config_dir: Path) -> list[Maker]:
    schema = _schema("config")
    recipes = set(load_methods(config_dir / "methods.yaml"))
    refs: dict[Path_, set[str]] = {("methods", i): recipes for i in range(len(config["methods"]))}
    for name, ex in config["experiments"].items():
        for field, known in (
            ("methods", recipes),
            ("workloads", set(config["workloads"])),
            ("scenarios", set(config["scenarios"])),
        ):
            for i in range(len(ex.get(field, []))):
                refs[("experiments", name, field, i)] = known
    for w in config["workloads"]:
        refs[("workloads", w, "dataset")] = set(config["datasets"])
    refs[("backend",)] = set(BACKEND_INFOS.names())  # a name; the descriptors say which
    # A user config's null removes the tier's key (config/README.md), so it is no invalid value
    # here; tests/unit/test_config.py checks that removing a required key is still one error.
    makers = schema_mutations(config, schema, schema["$defs"], none=False)
    return makers + unknown_names(refs)


@pytest.fixture(scope="module")
def config_makers(smoke_config, config_dir) -> list[Maker]:
    """Every way the property test breaks the smoke config."""
    return _config_makers(smoke_config, config_dir)


# --------------------------------------------------------------------------- psml config


def test_the_unmutated_smoke_config_is_accepted(config_dir, smoke_config, tmp_path, capsys):
    """The base of every mutation is valid: each failure below is the mutation's."""
    cf = tmp_path / "config.yaml"
    cf.write_text(yaml.safe_dump(smoke_config))
    rc, out, err = _run_cli(
        ["config", "--configfile", str(cf), "--config-dir", str(config_dir)], tmp_path, capsys
    )
    assert rc == 0 and err == "" and "tier: smoke" in out


def test_mutations_cover_the_issues_cases(config_makers):
    """Negative sizes, ratios out of range, wrong types, unknown keys and names, empty lists."""
    made = {(m.kind, m.path) for m in config_makers}
    for wanted in [
        ("range", ("workers",)),
        ("range", ("shards",)),
        ("range", ("seeds", 0)),
        ("range", ("workloads", "digits_mlp", "iterations")),
        ("range", ("workloads", "digits_mlp", "batch_size")),
        ("range", ("datasets", "digits", "test_fraction")),
        ("range", ("scenarios", "hetero_dc", "heterogeneity", "straggler_prob")),
        ("type", ("workers",)),
        ("type", ("workloads", "rcv1_logreg", "lr")),
        ("unknown name", ("backend",)),
        ("enum", ("workloads", "digits_mlp", "model")),
        ("unknown key", ()),
        ("unknown key", ("workloads", "digits_mlp")),
        ("new entry", ("datasets",)),
        ("unknown name", ("experiments", "overview", "methods", 0)),
        ("unknown name", ("experiments", "jpdc", "methods", 0)),
        ("unknown name", ("workloads", "digits_mlp", "dataset")),
        ("empty", ("experiments", "jpdc", "methods")),
    ]:
        assert wanted in made, wanted


@SETTINGS
@given(data=st.data())
def test_invalid_config_gives_one_clear_error(
    config_dir, smoke_config, config_makers, capsys, data
):
    """``psml config`` on a config with one invalid value: exit 2, one line naming the key."""
    mutation = data.draw(draw_mutation(config_makers), label="mutation")
    user = mutation.apply(smoke_config)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        cf = work / "config.yaml"
        cf.write_text(yaml.safe_dump(user))
        before = _files(work), _files(config_dir)
        rc, out, err = _run_cli(
            ["config", "--configfile", str(cf), "--config-dir", str(config_dir)], work, capsys
        )
        assert (_files(work), _files(config_dir)) == before
    assert_one_clear_error(rc, out, err, "config", mutation.expect)


def _methods_makers(methods: dict[str, Any]) -> list[Maker]:
    schema = _schema("methods")
    makers = schema_mutations(methods, schema, schema["$defs"])
    kinds = {
        "codec": "codec",
        "codec_down": "codec",
        "sync": "sync policy",
        "controller": "controller",
        "placement": "placement",
    }
    for name, recipe in methods.items():
        for block, kind in kinds.items():
            if block in recipe:  # an unknown block name (the registry lists the known ones)
                path = (name, block, "name")
                unknown = WORD.map(
                    lambda v, p=path, k=kind: Mutation(
                        p, f"no_{v}", f"unknown {k} 'no_{v}' (config key {_key(p)!r})"
                    )
                )
                makers.append(Maker("block name", path, unknown))
        # A ratio outside (0, 1] in a codec's or a controller's params.
        bad_ratio = st.one_of(
            st.floats(max_value=0.0, **FINITE),
            st.floats(min_value=1.0, exclude_min=True, **FINITE),
            NON_FINITE,
            WORD,
        )
        for block, block_name in (("codec", "topk"), ("controller", "static")):
            params = bad_ratio.map(
                lambda r, n=name, b=block, bn=block_name: Mutation(
                    (n, b), {"name": bn, "params": {"ratio": r}}, f"key '{n}.{b}.params':"
                )
            )
            makers.append(Maker("ratio", (name, block, "params", "ratio"), params))
    return makers


@pytest.fixture(scope="module")
def methods(config_dir: Path) -> dict[str, Any]:
    """config/methods.yaml as written, the valid document the mutations start from."""
    return yaml.safe_load((config_dir / "methods.yaml").read_text())


@pytest.fixture(scope="module")
def methods_makers(methods: dict[str, Any]) -> list[Maker]:
    """Every way the property test breaks the methods file."""
    return _methods_makers(methods)


@SETTINGS
@given(data=st.data())
def test_invalid_methods_file_gives_one_clear_error(
    config_dir, methods, methods_makers, capsys, data
):
    """``psml config`` with one invalid value in methods.yaml: the file and the key are named."""
    mutation = data.draw(draw_mutation(methods_makers), label="mutation")
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        root = work / "config"
        root.mkdir()
        os.symlink(config_dir / "tiers", root / "tiers")
        (root / "methods.yaml").write_text(yaml.dump(mutation.apply(methods), Dumper=DUMPER))
        cf = work / "config.yaml"
        cf.write_text("tier: smoke\n")
        before = _files(work)
        rc, out, err = _run_cli(
            ["config", "--configfile", str(cf), "--config-dir", str(root)], work, capsys
        )
        assert _files(work) == before
    assert_one_clear_error(rc, out, err, "config", mutation.expect)
    assert "methods.yaml" in err


def test_a_tier_with_no_method_and_no_experiment_is_refused(config_dir, tmp_path, capsys):
    """``methods: []`` with no experiments schedules nothing: refused, not an empty run."""
    root = tmp_path / "config"
    shutil.copytree(config_dir, root)
    tier = yaml.safe_load((root / "tiers" / "smoke.yaml").read_text())
    tier.pop("experiments")
    tier["methods"] = []
    (root / "tiers" / "smoke.yaml").write_text(yaml.safe_dump(tier))
    work = tmp_path / "work"
    work.mkdir()
    rc, out, err = _run_cli(
        ["config", "--configfile", str(root / "config.yaml"), "--config-dir", str(root)],
        work,
        capsys,
    )
    assert_one_clear_error(rc, out, err, "config", "no runs; list methods")
    assert list(work.iterdir()) == []


# --------------------------------------------------------------------------- psml train --run


@pytest.fixture(scope="module")
def runs(config_dir: Path) -> list[dict[str, Any]]:
    """Valid run JSONs: dense, hashed sparse (jpdc), heterogeneous rounds (pcp)."""
    exp = load_experiment({"tier": "smoke"}, config_dir)
    keys = [
        ("digits_mlp", "dense_bsp", "dc_10g"),
        ("rcv1_logreg", "jpdc", "dc_10g"),
        ("digits_mlp", "pcp", "hetero_dc"),
    ]
    return [json.loads(exp.run(w, m, s, exp.seeds[0]).to_json()) for w, m, s in keys]


def _run_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    from psml_core.config.specs import _part_schema

    schema = _part_schema("run")
    return schema, schema["$defs"]


@SETTINGS
@given(data=st.data())
def test_invalid_run_json_gives_one_clear_error(runs, capsys, data):
    """``psml train --run`` with one invalid value: exit 2 before any data is read or written."""
    base = data.draw(st.sampled_from(runs), label="run")
    schema, defs = _run_schema()
    # null is how an unset optional field is written, so it is no invalid value here
    mutation = data.draw(
        draw_mutation(schema_mutations(base, schema, defs, none=False)), label="mutation"
    )
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        argv = ["train", "--run", json.dumps(mutation.apply(base))]
        argv += ["--data", str(work / "data"), "--out", str(work / "out")]
        rc, out, err = _run_cli(argv, work, capsys)
        assert list(work.iterdir()) == []
    assert_one_clear_error(rc, out, err, "train", "--run: " + mutation.expect)


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (("method", "codec"), "key 'method.codec.params': codec 'topk': ratio must be in (0, 1]"),
        (("method", "sync", "name"), "unknown sync policy 'lockstep'"),
        (("dataset", "name"), "key 'dataset.name': expected a name"),
    ],
)
def test_run_json_blocks_and_names_are_checked(runs, tmp_path, capsys, change, expect):
    """What the schema cannot say about a run: block params and names, the parts' names."""
    value = {
        ("method", "codec"): {"name": "topk", "params": {"ratio": 1.5}},
        ("method", "sync", "name"): "lockstep",
        ("dataset", "name"): None,
    }[change]
    argv = ["train", "--run", json.dumps(_set(runs[0], change, value))]
    argv += ["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    rc, out, err = _run_cli(argv, tmp_path, capsys)
    assert_one_clear_error(rc, out, err, "train", expect)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("buckets", "expect"),
    [
        (0, "key 'method.hashing.buckets': 0 is out of range; must be >= 1"),
        ("x", "key 'method.hashing.buckets': expected integer, got 'x'"),
        (
            5,
            "key 'method.hashing': give exactly one of the keys buckets, ratio; got buckets, ratio",
        ),
    ],
)
def test_an_invalid_key_inside_a_one_of_is_named(runs, tmp_path, capsys, buckets, expect):
    """A bad ``buckets`` beside ``ratio`` names buckets; a valid one names the one-of rule.

    Found by the hypothesis test above: jsonschema's best match is the shallowest error, so it
    reported only the one-of rule and not the key whose value was wrong.
    """
    run = _set(runs[1], ("method", "hashing", "buckets"), buckets)
    argv = ["train", "--run", json.dumps(run)]
    argv += ["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    rc, out, err = _run_cli(argv, tmp_path, capsys)
    assert_one_clear_error(rc, out, err, "train", expect)


# --------------------------------------------------------------------------- real processes


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["config", "--set", "workers=-2"], "key 'workers': -2 is out of range; must be >= 1"),
        (["config", "--set", "workloads={digits_mlp: {lr: .nan}}"], "expected a finite number"),
        (["train", "--data", "d", "--out", "o"], "key 'workload.batch_size': 0 is out of range"),
    ],
)
def test_the_psml_command_exits_non_zero_without_a_traceback(
    config_dir, runs, tmp_path, argv, expect
):
    """End to end through the console entry point: exit 2, one line, no files."""
    if argv[0] == "config":
        argv = [
            *argv,
            "--configfile",
            str(config_dir / "config.yaml"),
            "--config-dir",
            str(config_dir),
        ]
    else:
        argv = [*argv, "--run", json.dumps(_set(runs[0], ("workload", "batch_size"), 0))]
    proc = subprocess.run(
        [sys.executable, "-m", "psml_core", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_clear_error(proc.returncode, proc.stdout, proc.stderr, argv[0], expect)
    assert list(tmp_path.iterdir()) == []
