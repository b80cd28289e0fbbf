"""``psml validate``: the same runs as real processes on a shaped link and on the simulator.

For each link, a :class:`~psml_core.validate.netns.Testbed` of P + S namespaces (one per rank,
so every rank is a machine of its own, as the simulator's non-colocated layout has it); for
each method and repeat, the dist backend's ranks inside them, started with the env launcher
(``RANK``, ``MASTER_ADDR`` = rank 0's address, ``GLOO_SOCKET_IFNAME`` = the node's device); then
the same run spec on the sim backend with the link's scenario. Both are timed the same way:
the run's end (the last worker's last iteration) divided by its iterations.

A link comes from a tier scenario (``--scenario``: its bandwidth and latency) or is given as
``RATE_MBIT:DELAY_MS`` (``--link``: a scenario with the schema's other defaults). Scenarios with
what a static link cannot give (delay processes, cross-traffic, bandwidth steps, per-machine
NICs, heterogeneous workers) are refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from psml_core.config import Experiment, RunSpec, ScenarioSpec
from psml_core.errors import ConfigError, RunError
from psml_core.validate.netns import Link, Testbed
from psml_core.validate.table import Row, ValidationTable

__all__ = ["Plan", "link_scenario", "run_validation"]

LAUNCHER = "psml_core.engine.torchdist.launch"
_UNSHAPEABLE = ("delay", "cross_traffic", "bandwidth_steps", "nics", "heterogeneity")


@dataclass(frozen=True)
class Plan:
    """What to validate: links (each with its sim scenario), methods, layout and repeats."""

    links: tuple[tuple[Link, ScenarioSpec], ...]
    methods: tuple[str, ...]
    workload: str
    workers: int
    shards: int
    iterations: int
    repeats: int
    seed: int
    max_error: float
    rt_priority: int = 10
    rank_rt: int = 5
    timeout_s: float = 600.0
    hidden: tuple[int, ...] | None = None


def link_scenario(exp: Experiment, item: str, by_name: bool) -> tuple[Link, ScenarioSpec]:
    """A link and its scenario: a tier scenario by name, or ``RATE_MBIT:DELAY_MS``.

    Raises:
        ConfigError: an unknown scenario, one a static link cannot give, or a malformed link.
    """
    if by_name:
        if item not in exp.scenarios:
            known = ", ".join(sorted(exp.scenarios))
            raise ConfigError(f"--scenario {item!r}: not in tier {exp.tier!r}; its: {known}")
        sc = exp.scenarios[item]
        extra = [k for k in _UNSHAPEABLE if getattr(sc, k)]
        if extra:
            raise ConfigError(
                f"--scenario {item!r} has {', '.join(extra)}, which a shaped link does not "
                "reproduce; validate a scenario with a plain link, or give --link RATE:DELAY"
            )
        return Link(sc.bandwidth_gbps * 1000, sc.latency_us), sc
    rate, sep, delay = item.partition(":")
    try:
        rate_mbit, delay_ms = float(rate), float(delay)
        if not sep or rate_mbit <= 0 or delay_ms < 0:
            raise ValueError
    except ValueError:
        raise ConfigError(
            f"--link {item!r}: expected RATE_MBIT:DELAY_MS, e.g. 100:2 (100 Mbit/s, 2 ms)"
        ) from None
    link = Link(rate_mbit, delay_ms * 1000)
    sc = ScenarioSpec(name=f"link_{link.label}", bandwidth_gbps=rate_mbit / 1000)
    return link, dataclasses.replace(sc, latency_us=delay_ms * 1000)


def _spec(exp: Experiment, plan: Plan, sc: ScenarioSpec, method: str, backend: str) -> RunSpec:
    """The run both backends run: the tier's cell settings on the validation's layout."""
    if method not in exp.recipes:
        raise ConfigError(f"--methods: {method!r} is no recipe; `psml config` lists them")
    if plan.workload not in exp.workloads:
        known = ", ".join(sorted(exp.workloads))
        raise ConfigError(f"--workload {plan.workload!r}: not in tier {exp.tier!r}; its: {known}")
    base = exp.run(plan.workload, method, next(iter(exp.scenarios)), plan.seed)
    return dataclasses.replace(
        base,
        run_id=f"validate/{method}/{sc.name}/seed{plan.seed}",
        backend=backend,
        workers=plan.workers,
        shards=plan.shards,
        colocated=False,
        workload=dataclasses.replace(
            base.workload,
            iterations=plan.iterations,
            **({"hidden": plan.hidden} if plan.hidden else {}),
        ),
        scenario=sc,
        checkpoint_every=0,
    )


def _per_iteration(times: list[float], moved: list[int], spec: RunSpec) -> tuple[float, float]:
    """Seconds per iteration and a worker's bytes per iteration (up and down).

    The seconds are the run's end (its last worker's last iteration) over its iterations.
    """
    n = spec.workload.iterations
    return float(max(times)) / n, float(sum(moved)) / (n * spec.workers)


def _sim(spec: RunSpec, data: Path) -> tuple[float, float]:
    from psml_core.data.store import load_prepared
    from psml_core.engine import SimBackend, staged_job
    from psml_core.engine.training import configure_torch

    configure_torch(spec)
    records = SimBackend().run(staged_job(spec, load_prepared(data)))
    moved = [r.bytes_up + r.bytes_down for r in records]
    return _per_iteration([r.time_s for r in records], moved, spec)


def _dist(
    tb: Testbed, spec: RunSpec, data: Path, work: Path, port: int, timeout_s: float, rank_rt: int
) -> tuple[float, float]:
    """One dist run inside the testbed: its seconds and a worker's bytes per iteration."""
    import pyarrow.parquet as pq

    work.mkdir(parents=True)
    run = work / "run.json"
    run.write_text(spec.to_json(), encoding="utf-8")
    out, world = work / "out", spec.workers + spec.shards
    drop = ("TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID", "PSML_DIST_STORE")
    base = {k: v for k, v in os.environ.items() if k not in drop}
    procs, logs = [], []
    for r in range(world):
        env = {
            **base,
            "RANK": str(r),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": "0",
            "MASTER_ADDR": tb.nodes[0].address,
            "MASTER_PORT": str(port),
            "GLOO_SOCKET_IFNAME": tb.nodes[r].ifname,
            "PSML_PROGRESS": "off",
        }
        argv = [sys.executable, "-m", LAUNCHER, "--run", str(run), "--data", str(data)]
        if rank_rt:  # SCHED_FIFO: the host's other load does not delay the ranks' wake-ups
            argv = ["chrt", "-f", str(rank_rt), *argv]
        log = open(work / f"rank{r}.log", "wb")  # noqa: SIM115 - closed below
        logs.append(log)
        procs.append(
            tb.popen(r, [*argv, "--out", str(out)], env=env, stdout=log, stderr=subprocess.STDOUT)
        )
    deadline = time.monotonic() + timeout_s
    try:
        while any(p.poll() is None for p in procs):
            if time.monotonic() > deadline:
                raise RunError(f"validation run {spec.run_id!r} took over {timeout_s:g} s")
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
    failed = [r for r, p in enumerate(procs) if p.returncode]
    if failed:
        text = (work / f"rank{failed[0]}.log").read_text(encoding="utf-8", errors="replace")
        lines = [ln for ln in text.splitlines() if ln.startswith("psml")] or text.splitlines()
        why = lines[-1] if lines else "no output"
        raise RunError(f"validation run {spec.run_id!r}: rank {failed[0]} failed: {why}")
    t = pq.read_table(out / "metrics.parquet", columns=["time_s", "bytes_up", "bytes_down"])
    up, down = t.column("bytes_up").to_pylist(), t.column("bytes_down").to_pylist()
    moved = [a + b for a, b in zip(up, down, strict=True)]
    return _per_iteration(t.column("time_s").to_pylist(), moved, spec)


def _machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "host": socket.gethostname(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "load_before": list(os.getloadavg()),
    }


ZERO = Link(None, 0.0)
"""The calibration link: no delay, no shaping (the testbed's own stack and the ranks' software)."""


def _zero_scenario(rate_bps: float | None = None) -> ScenarioSpec:
    """The sim's calibration link: the testbed's own TCP goodput (else 1 Tbit/s), no latency.

    The goodput is payload bits per second, so the link carries it at wire efficiency 1; no
    per-message overhead.
    """
    gbps = 1000.0 if rate_bps is None else rate_bps / 1e9
    sc = ScenarioSpec(name="link_zero", bandwidth_gbps=gbps)
    return dataclasses.replace(sc, latency_us=0.0, message_overhead_us=0.0, wire_efficiency=1.0)


class _Runner:
    """The runs of one validation: dist runs inside testbeds, sim runs in this process."""

    def __init__(self, exp: Experiment, plan: Plan, tmp: Path) -> None:
        from psml_core.data.prepare import prepare_dataset

        self.exp, self.plan, self.tmp = exp, plan, tmp
        self.data = tmp / "data"
        first = _spec(exp, plan, plan.links[0][1], plan.methods[0], "dist")
        prepare_dataset(first.dataset, self.data)
        self.port = 29400

    def sims(self, sc: ScenarioSpec) -> dict[str, tuple[float, float]]:
        """Seconds and a worker's bytes per iteration of every method on the sim with ``sc``."""
        return {
            m: _sim(_spec(self.exp, self.plan, sc, m, "sim"), self.data) for m in self.plan.methods
        }

    def reals(
        self, links: list[tuple[Link, ScenarioSpec]]
    ) -> tuple[dict[tuple[str, str], list[tuple[float, float]]], list[str], list[float]]:
        """Real seconds per iteration, testbed reports and each link's TCP goodput.

        Returns each (link, method)'s real seconds and bytes per iteration per repeat, each
        line's report and each link's goodput in bits per second (:func:`.throughput.measure`).
        Every link's testbed stands at once and the runs go round them, repeat by repeat, so
        that the host's load drifts over all of them alike.
        """
        from psml_core.validate.throughput import measure

        plan = self.plan
        out: dict[tuple[str, str], list[tuple[float, float]]] = {}
        with contextlib.ExitStack() as stack:
            beds = [
                stack.enter_context(
                    Testbed(
                        plan.workers + plan.shards, link, rt_priority=plan.rt_priority, name=f"l{k}"
                    )
                )
                for k, (link, _) in enumerate(links)
            ]
            goodputs = []
            for tb, (link, _) in zip(beds, links, strict=True):
                # about 2 s of the configured rate, at most 64 MiB (the ceiling: 64 MiB)
                rate = link.rate_mbit * 1e6 if link.rate_mbit else None
                nbytes = 64 << 20 if rate is None else min(64 << 20, int(rate / 8 * 2))
                goodputs.append(measure(tb, nbytes))
                print(
                    f"psml validate: {link.label} carries {goodputs[-1] / 1e6:.0f} Mbit/s of TCP "
                    "goodput" + (" (the testbed's own ceiling)" if rate is None else ""),
                    flush=True,
                )
            for rep in range(plan.repeats):
                for tb, (link, sc) in zip(beds, links, strict=True):
                    for m in plan.methods:
                        self.port += 1
                        work = self.tmp / link.label / m / f"r{rep}"
                        spec = _spec(self.exp, plan, sc, m, "dist")
                        real, moved = _dist(
                            tb, spec, self.data, work, self.port, plan.timeout_s, plan.rank_rt
                        )
                        out.setdefault((link.label, m), []).append((real, moved))
                        print(
                            f"psml validate: {link.label} {m} repeat {rep + 1}/{plan.repeats}: "
                            f"{real:.4f} s/iter (load {os.getloadavg()[0]:.1f})",
                            flush=True,
                        )
        return out, [tb.report for tb in beds], goodputs


def _row(
    runner: _Runner,
    link: Link,
    sc: ScenarioSpec,
    method: str,
    reals: dict[tuple[str, str], list[tuple[float, float]]],
    sim: tuple[float, float],
    zero_sim: tuple[float, float],
) -> Row:
    """One (link, method): real and sim, and the sim again with the calibrated overhead."""
    real = reals[(link.label, method)]
    row = Row(
        link.label,
        method,
        [t for t, _ in real],
        sim[0],
        [t for t, _ in reals[(ZERO.label, method)]],
        zero_sim[0],
        real_bytes=[b for _, b in real],
        sim_bytes=sim[1],
    )
    more = sc.message_overhead_us + row.message_overhead_us
    calibrated = dataclasses.replace(sc, message_overhead_us=more)
    spec = _spec(runner.exp, runner.plan, calibrated, method, "sim")
    row.calibrated_sim_s = _sim(spec, runner.data)[0]
    return row


def _link_record(link: Link, sc: ScenarioSpec, line: str, goodput: float) -> dict[str, Any]:
    """A shaped link as the table records it, with what it delivered to one TCP flow."""
    return {
        "label": link.label,
        "rate_mbit": link.rate_mbit,
        "delay_us": link.delay_us,
        "scenario": sc.name,
        "wire_efficiency": sc.wire_efficiency,
        "message_overhead_us": sc.message_overhead_us,
        "delay_line": line,
        # the sim's model of the delivered goodput is rate_mbit x wire_efficiency
        "goodput_mbit": round(goodput / 1e6, 1),
    }


def run_validation(exp: Experiment, plan: Plan, command: str) -> ValidationTable:
    """Calibrate on the zero link, then run every link's methods on dist and on sim."""
    from psml_core.provenance import git_state

    machine = _machine()
    commit, dirty = git_state()  # the code that runs: the state at the start
    rows: list[Row] = []
    links: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="psml-validate-") as tmp:
        runner = _Runner(exp, plan, Path(tmp))
        every = [(ZERO, _zero_scenario()), *plan.links]
        reals, lines, goodputs = runner.reals(every)
        goodput = goodputs[0]
        zero_sim = runner.sims(_zero_scenario(goodput))
        for (link, sc), line, put in zip(plan.links, lines[1:], goodputs[1:], strict=True):
            sims = runner.sims(sc)
            rows += [_row(runner, link, sc, m, reals, sims[m], zero_sim[m]) for m in plan.methods]
            links.append(_link_record(link, sc, line, put))
    machine["load_after"] = list(os.getloadavg())
    return ValidationTable(
        date=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        commit=commit,
        dirty=dirty,
        machine=machine,
        command=command,
        settings={
            "tier": exp.tier,
            "workload": plan.workload,
            **({"hidden": list(plan.hidden)} if plan.hidden else {}),
            "workers": plan.workers,
            "shards": plan.shards,
            "iterations": plan.iterations,
            "repeats": plan.repeats,
            "seed": plan.seed,
            "max_error": plan.max_error,
        },
        testbed={
            "ranks": "one network namespace per rank (P workers + S shards, no colocation)",
            "delay": "psml delay line (C, SCHED_FIFO) between TUN devices",
            "shaping": "tbf on each TUN device (uplink), on an ifb per node (downlink, > 2 ranks)",
            "congestion_control": "cubic",
            "launcher": "env (RANK, MASTER_ADDR, GLOO_SOCKET_IFNAME)",
            "rank_scheduling": f"SCHED_FIFO {plan.rank_rt}" if plan.rank_rt else "normal",
            "calibration": {
                "link": "no delay, unshaped",
                "delay_line": lines[0],
                "goodput_mbit": round(goodput / 1e6, 1),
                "sim_link": "the measured TCP goodput, no latency, no per-message overhead",
            },
        },
        links=links,
        rows=rows,
    )
