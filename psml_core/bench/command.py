"""The ``psml bench`` subcommand: the codec benchmark, and calibration of a device file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from psml_core.errors import ConfigError

__all__ = ["bench_args", "bench_calibrate", "bench_calibrate_gpu", "cmd_bench"]


def cmd_bench(args: argparse.Namespace) -> int:
    """Run a performance benchmark and print its table, or calibrate a device profile."""
    if args.what == "calibrate":
        return bench_calibrate(args)
    from psml_core.atomic import write_json
    from psml_core.bench.codecs import bench_codecs, format_table, rows_as_dicts

    threads = tuple(0 if t == "all" else int(t) for t in args.threads.split(","))
    print(format_table([], header=True))
    rows = bench_codecs(
        n=args.n,
        ratios=tuple(float(r) for r in (args.ratios or "0.1,0.01,0.001").split(",")),
        threads=threads,
        codecs=tuple(args.codecs.split(",")) if args.codecs else None,
        repeats=args.repeats or 3,
        log=lambda line: print(line, flush=True),
    )
    if args.json:
        write_json(args.json, rows_as_dicts(rows))
    return 0


def _gpus(args: argparse.Namespace) -> list[str]:
    """``--estimate-gpu``'s GPUs, each one with cited figures."""
    from psml_core.bench.calibrate import GPU_SPECS

    gpus = [g for g in (args.estimate_gpu or "").split(",") if g]
    unknown = [g for g in gpus if g not in GPU_SPECS]
    if unknown:
        raise ConfigError(
            f"--estimate-gpu: no cited figures for {', '.join(unknown)}; known GPUs: "
            + ", ".join(sorted(GPU_SPECS))
        )
    return gpus


def bench_calibrate(args: argparse.Namespace) -> int:
    """``psml bench calibrate``: measure this machine into a device file; estimate GPU files."""
    from psml_core.bench import calibrate as cal
    from psml_core.config import load_yaml

    if args.plugin:
        return _calibrate_plugins(args)
    if getattr(args, "update", False):
        return _calibrate_update(args)
    if args.torch_device or args.force_cpu:
        return bench_calibrate_gpu(args)
    gpus = _gpus(args)
    if args.source and args.out:
        raise ConfigError("give --out (measure this machine) or --from (reuse a file), not both")
    if not (args.source or args.out):
        raise ConfigError(
            "psml bench calibrate needs --out FILE (or --from FILE --estimate-gpu, or --plugin "
            "CODECS)"
        )
    if args.source and not gpus:
        raise ConfigError("--from only feeds --estimate-gpu; name the GPUs (e.g. v100,a100)")
    if args.out:
        device = args.cost_profile or Path(args.out).stem
        command = f"psml bench calibrate --cost-profile {device} --out {args.out}"
        settings: dict[str, Any] = {}
        if args.quick:
            command += " --quick"
            q = cal.QUICK
            settings = {"sizes": q.sizes, "ratios": q.ratios, "repeats": q.repeats}
            settings["min_time"] = q.min_time
        if args.sizes:
            command += f" --sizes {args.sizes}"
            settings["sizes"] = tuple(int(n) for n in args.sizes.split(","))
        if args.ratios:
            command += f" --ratios {args.ratios}"
            settings["ratios"] = tuple(float(r) for r in args.ratios.split(","))
        if args.repeats:
            command += f" --repeats {args.repeats}"
            settings["repeats"] = args.repeats
        if args.codecs:
            command += f" --codecs {args.codecs}"
            settings["codecs"] = tuple(args.codecs.split(","))
        spec = cal.Calibration(
            device=device,
            command=command,
            quick=args.quick,
            note=args.note or "",
            log=lambda line: print(line, flush=True),
            **settings,
        )
        content = cal.calibrate(spec)
        header = (
            f"Device profile {device!r}, measured by `{command}`.\n"
            "Do not edit by hand: re-run the command (see benchmarks/README.md, Calibration)."
        )
        cal.write_device(args.out, content, header)
        print(cal.format_summary(content))
        print(f"wrote {args.out}")
        source_path, cpu = Path(args.out), content
    else:
        source_path = Path(args.source)
        cpu = load_yaml(source_path, what="device file")
        if not isinstance(cpu, dict) or not isinstance(cpu.get("codec_costs"), dict):
            raise ConfigError(f"device file {str(source_path)!r} has no codec_costs table")
    for gpu in gpus:
        out = source_path.parent / f"{gpu}.yaml"
        content = cal.estimate_gpu(cpu, gpu, source_path.name)
        header = (
            f"Device profile {gpu!r}: compute cited, codec costs estimated from "
            f"{source_path.name} by\n`psml bench calibrate --from {source_path} "
            f"--estimate-gpu {gpu}` (regenerated, never edited by hand)."
        )
        cal.write_device(out, content, header)
        print(f"wrote {out}")
    return 0


def _calibrate_update(args: argparse.Namespace) -> int:
    """``psml bench calibrate --update --codecs C --out FILE``: re-measure C into FILE."""
    import datetime

    from psml_core.bench import calibrate as cal
    from psml_core.bench.calibrate_codecs import calibrate_codecs
    from psml_core.bench.timing import set_threads
    from psml_core.codecs import CODECS
    from psml_core.config import load_yaml
    from psml_core.devices.device import device_from_dict

    if not args.out:
        raise ConfigError("--update needs --out FILE (an existing device file)")
    if args.source or args.estimate_gpu or args.sizes or args.ratios or args.quick:
        raise ConfigError(
            "--update measures at the file's own sizes, ratios and repeats: leave out --from, "
            "--estimate-gpu, --sizes, --ratios and --quick"
        )
    path = Path(args.out)
    if not path.is_file():
        raise ConfigError(f"--update: device file {str(path)!r} does not exist; measure it first")
    content = load_yaml(path, what="device file")
    device_from_dict(content, path.stem, source=f"device file {str(path)!r}")  # valid first
    cc = content["codec_costs"]
    if cc["source"]["kind"] != "measured":
        raise ConfigError(
            f"--update: {str(path)!r}'s codec costs are {cc['source']['kind']}, not measured on "
            "this machine; re-measure the whole file instead"
        )
    c = cc["calibration"]
    every = not args.codecs  # the whole codec table: every codec and wrapper
    codecs = tuple(args.codecs.split(",")) if args.codecs else tuple(CODECS.names())
    restore = set_threads(int(c.get("threads", 1)))
    try:
        costs = calibrate_codecs(
            c["sizes"],
            c["ratios"],
            int(c["repeats"]),
            codecs,
            log=lambda line: print(line, flush=True),
            wrappers=every,
        )
    finally:
        restore()
    cc["codecs"].update(costs["codecs"])
    if every:
        cc["wrappers"] = costs["wrappers"]
    what = "every codec and wrapper" if every else ", ".join(codecs)
    command = (
        "psml bench calibrate --update"
        + (f" --codecs {args.codecs}" if args.codecs else "")
        + f" --out {args.out}"
    )
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    note = f"; {args.note}" if args.note else ""
    cc["source"]["detail"] += (
        f"; re-measured {what} on {today} with `{command}` (machine: "
        f"{cal.machine_description()}; the same sizes, ratios and repeats{note})"
    )
    kept = [
        line[2:] if line.startswith("# ") else line[1:]
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("#") and not line.startswith("# Do not edit")
    ]
    header = "\n".join(
        [
            *kept,
            f"Codec costs ({what}) re-measured on {today} by `{command}`.",
            "Do not edit by hand: re-run the command (see benchmarks/README.md, Calibration).",
        ]
    )
    cal.write_device(path, content, header)
    print(f"wrote {path}")
    return 0


def bench_calibrate_gpu(args: argparse.Namespace) -> int:
    """``psml bench calibrate --torch-device cuda --out FILE``: measure the local GPU's profile.

    Compute and memcpy are measured on the GPU; the codec table is the CPU table of ``--from``
    (default ``config/devices/cpu-core.yaml``) scaled by the measured memcpy
    (:mod:`psml_core.bench.calibrate_gpu`).
    """
    from psml_core.bench.calibrate import format_summary, write_device
    from psml_core.bench.calibrate_gpu import GpuCalibration, calibrate_gpu
    from psml_core.config import config_root, load_yaml

    if not args.out:
        raise ConfigError("--torch-device cuda needs --out FILE (e.g. config/devices/h100.yaml)")
    if args.estimate_gpu:
        raise ConfigError(
            "--torch-device cuda measures the GPU; --estimate-gpu estimates one: pick one"
        )
    source = Path(args.source) if args.source else config_root() / "devices" / "cpu-core.yaml"
    cpu = load_yaml(source, what="device file")
    if not isinstance(cpu, dict) or not isinstance(cpu.get("codec_costs"), dict):
        raise ConfigError(f"device file {str(source)!r} has no codec_costs table")
    name = args.cost_profile or Path(args.out).stem
    command = "psml bench calibrate --torch-device cuda"
    command += f" --cost-profile {args.cost_profile}" * bool(args.cost_profile)
    command += f" --out {args.out}"
    if args.source:
        command += f" --from {args.source}"
    command += " --quick" * bool(args.quick) + " --force-cpu" * bool(args.force_cpu)
    spec = GpuCalibration(
        device=name,
        command=command,
        cpu=cpu,
        cpu_file=source.name,
        repeats=args.repeats or (3 if args.quick else 5),
        quick=args.quick,
        force_cpu=args.force_cpu,
        min_time=0.0 if args.quick else 2e-3,
        note=args.note or "",
        log=lambda line: print(line, flush=True),
    )
    content = calibrate_gpu(spec)
    header = (
        f"Device profile {name!r}: compute and memcpy measured on the local GPU by\n"
        f"`{command}`; codec costs estimated from {source.name} (the codecs are host code).\n"
        "Do not edit by hand: re-run the command (see benchmarks/README.md, Calibration)."
    )
    write_device(args.out, content, header)
    print(format_summary(content))
    print(f"wrote {args.out}")
    return 0


def _calibrate_plugins(args: argparse.Namespace) -> int:
    """``psml bench calibrate --plugin CODECS``: each plugin codec's own cost file."""
    from psml_core.bench import calibrate as cal
    from psml_core.bench.plugin_costs import calibrate_plugin_codecs

    if args.out or args.source or args.estimate_gpu:
        raise ConfigError(
            "--plugin writes each codec's own cost file (config/devices/plugins/<codec>.yaml); "
            "leave out --out, --from and --estimate-gpu"
        )
    command = f"psml bench calibrate --plugin {args.plugin}"
    settings: dict[str, Any] = {}
    if args.quick:
        command += " --quick"
        q = cal.QUICK
        settings = {"sizes": q.sizes, "ratios": q.ratios, "repeats": q.repeats}
        settings["min_time"] = q.min_time
    for flag, key, parse in (
        ("sizes", "sizes", int),
        ("ratios", "ratios", float),
    ):
        if getattr(args, flag):
            command += f" --{flag} {getattr(args, flag)}"
            settings[key] = tuple(parse(v) for v in getattr(args, flag).split(","))
    if args.repeats:
        command += f" --repeats {args.repeats}"
        settings["repeats"] = args.repeats
    written = calibrate_plugin_codecs(
        [c for c in args.plugin.split(",") if c],
        command=command,
        quick=args.quick,
        machine=cal.machine_description(),
        log=lambda line: print(line, flush=True),
        **settings,
    )
    for path in written:
        print(f"wrote {path}")
    return 0


class _DeviceAlias(argparse.Action):
    """The deprecated ``--device``: ``cuda`` is now ``--torch-device``, a name ``--cost-profile``.

    Its one flag meant both: the cost profile's name, or, given ``cuda``, the torch device to
    measure. It sets the new one and says so in one line on stderr.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Set ``--torch-device`` or ``--cost-profile`` from the old flag's value."""
        new = "torch-device" if str(values).startswith("cuda") else "cost-profile"
        print(
            f"psml bench: {option_string} is deprecated, renamed --{new} (here: --{new} {values})",
            file=sys.stderr,
        )
        setattr(namespace, new.replace("-", "_"), values)


def bench_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml bench``."""
    p.add_argument("what", choices=["codecs", "calibrate"], help="which benchmark")
    p.add_argument("--n", type=int, default=25_000_000, help="codecs: vector length (float32)")
    p.add_argument(
        "--ratios", help="comma list (codecs: 0.1,0.01,0.001; calibrate: 0.001,0.01,0.1,0.3,1)"
    )
    p.add_argument("--threads", default="1,all", help="codecs: comma list; 'all' = every core")
    p.add_argument("--codecs", default="", help="comma list (default: all registered)")
    p.add_argument("--repeats", type=int, help="timed repetitions (codecs: 3, calibrate: 5)")
    p.add_argument("--json", help="codecs: also write the rows as JSON here")
    p.add_argument(
        "--cost-profile",
        metavar="NAME",
        help="calibrate: the cost profile's name, config/devices/<NAME>.yaml (default: --out's "
        "stem)",
    )
    p.add_argument(
        "--torch-device",
        choices=["cuda"],
        help="calibrate: measure the local GPU instead of this CPU (compute and memcpy; codec "
        "costs scaled from --from, default cpu-core)",
    )
    p.add_argument("--device", action=_DeviceAlias, help=argparse.SUPPRESS)
    p.add_argument(
        "--force-cpu",
        action="store_true",
        help="calibrate --torch-device cuda: run the GPU path on the CPU's torch device (tests "
        "only)",
    )
    p.add_argument("--out", help="calibrate: the device file to write (measured on this machine)")
    p.add_argument(
        "--sizes", help="calibrate: comma list of vector lengths (default 2^10 ... 2^24)"
    )
    p.add_argument(
        "--quick", action="store_true", help="calibrate: tiny sizes, 1 repeat (tests only)"
    )
    p.add_argument("--note", help="calibrate: words added to the measured source's detail")
    p.add_argument(
        "--estimate-gpu",
        metavar="GPUS",
        help="calibrate: comma list (v100,a100): also write <GPU>.yaml next to the CPU file, "
        "codec costs scaled from it, compute cited",
    )
    p.add_argument(
        "--plugin",
        metavar="CODECS",
        help="calibrate: comma list of plugin codecs; measure each into its own cost file, "
        "config/devices/plugins/<codec>.yaml (or under $PSML_PLUGIN_COSTS)",
    )
    p.add_argument(
        "--update",
        action="store_true",
        help="calibrate: re-measure the codec costs of the existing --out file (only --codecs, "
        "if given; else every codec and wrapper) at its sizes, ratios and repeats; its compute "
        "profile and memcpy reference are kept",
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="calibrate: take the CPU table from this device file instead of measuring",
    )
