"""``psml validate``: its arguments and what it prints (see :mod:`.harness`)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from psml_core import layout
from psml_core.errors import ConfigError, RunError

__all__ = ["DEFAULT_METHODS", "cmd_validate", "validate_args"]

DEFAULT_METHODS = "dense_bsp,topk_ef,dfs,ratatouille,ssp_2,dc2_topk"


def validate_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml validate``."""
    p.add_argument("--configfile", default="config/config.yaml", help="the user's config file")
    p.add_argument("--tier", help="the tier whose recipes, workloads and scenarios are used")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    p.add_argument(
        "--scenario",
        action="append",
        default=[],
        help="a tier scenario to shape a link like (repeatable; default slow_100m)",
    )
    p.add_argument(
        "--link",
        action="append",
        default=[],
        metavar="RATE_MBIT:DELAY_MS",
        help="a link given directly, e.g. 500:1 (repeatable)",
    )
    p.add_argument("--methods", default=DEFAULT_METHODS, help="comma-separated recipes")
    p.add_argument("--workload", default="digits_mlp", help="the workload (default digits_mlp)")
    p.add_argument(
        "--hidden",
        metavar="H1,H2,...",
        help="replace the workload's hidden layer widths (e.g. 512,512: a 1.2 MB gradient on "
        "digits), so that the link rather than the ranks' software sets the time",
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--shards", type=int, default=1, help="server shard processes (default 1)")
    p.add_argument(
        "--iterations", type=int, default=60, help="training iterations per run (default 60)"
    )
    p.add_argument(
        "--repeats", type=int, default=3, help="real runs per method and link (default 3)"
    )
    p.add_argument("--max-error", type=float, default=0.10, help="the bound on |sim/real - 1|")
    p.add_argument(
        "--rt-priority", type=int, default=10, help="the delay line's SCHED_FIFO priority (0: off)"
    )
    p.add_argument(
        "--rank-rt",
        type=int,
        default=5,
        help="the ranks' SCHED_FIFO priority, so that the host's other load does not delay "
        "their wake-ups (0: normal scheduling)",
    )
    p.add_argument(
        "--out",
        help="the table (JSON; default: the tier's report.validation, else "
        "results/<tier>/validation.json)",
    )


def _hidden(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        widths = tuple(int(w) for w in text.split(","))
        if not widths or min(widths) < 1:
            raise ValueError
    except ValueError:
        raise ConfigError(
            f"--hidden {text!r}: expected comma-separated positive widths, e.g. 512,512"
        ) from None
    return widths


def cmd_validate(args: argparse.Namespace) -> int:
    """Run the validation; print the table; exit 1 if a row is outside the bound."""
    from psml_core.config import deployment_config_dir
    from psml_core.run_resolver import load_tier, user_config
    from psml_core.validate.harness import Plan, link_scenario, run_validation
    from psml_core.validate.netns import preflight

    why = preflight()
    if why is not None:
        raise RunError(f"cannot build the shaped testbed: {why}")
    exp = load_tier(user_config(args.configfile, args.set, args.tier), deployment_config_dir())
    items = [(s, True) for s in args.scenario] + [(x, False) for x in args.link]
    links = [link_scenario(exp, item, by_name) for item, by_name in items or [("slow_100m", True)]]
    hidden = _hidden(args.hidden)
    plan = Plan(
        links=tuple(links),
        hidden=hidden,
        methods=tuple(m for m in args.methods.split(",") if m),
        workload=args.workload,
        workers=args.workers,
        shards=args.shards,
        iterations=args.iterations,
        repeats=args.repeats,
        seed=exp.seeds[0],
        max_error=args.max_error,
        rt_priority=args.rt_priority,
        rank_rt=args.rank_rt,
    )
    command = shlex.join(["psml", "validate", *sys.argv[2:]])
    table = run_validation(exp, plan, command)
    out = args.out or exp.report.get("validation") or layout.path(layout.VALIDATION, tier=exp.tier)
    table.write(out)
    print(table.markdown())
    outside = [r for r in table.rows if not table.within(r)]
    print(
        f"psml validate: {len(table.rows) - len(outside)} of {len(table.rows)} within "
        f"±{100 * table.max_error:g}%; table written to {Path(out)}"
    )
    return 1 if outside else 0
