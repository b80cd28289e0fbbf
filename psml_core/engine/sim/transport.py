"""A simulated worker's transport: its step's messages as SimPy events on the simulated clock.

:class:`SimTransport` is the sim backend's part of :class:`~psml_core.engine.loop.WorkerLoop`:
the pull and push of each shard are processes of the shared
:class:`~psml_core.engine.sim.processes.RunState` over the fair-share network, the device's
decode and encode times are charged from the codec cost tables, and a step's compute time is
the compute model's. Its hooks are the run's checkpoint drain (:meth:`begin`), the dynamic
placement's migration point (in :meth:`pull`, once every answer is in) and the record's
consumers (rows, progress, the placement's traffic).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import numpy as np

from psml_core.codecs.lossless import snappy_bytes
from psml_core.engine.loop import Pulled, Pushed, Transport
from psml_core.engine.sim.processes import RunState, Served
from psml_core.engine.sim.started import Started
from psml_core.engine.step import budget_spent, encode_pushes
from psml_core.engine.timeline import shard_ready, step_timeline
from psml_core.models.base import Matrix
from psml_core.sync.rounds import REPORT_BYTES, RoundReport

if TYPE_CHECKING:
    from psml_core.engine.worker import Worker

__all__ = ["SimTransport"]


class SimTransport(Transport):
    """Worker ``p``'s messages in a simulated run.

    Args:
        state: The run's shared state and message processes.
        p: The worker.
        arrived: A resumed worker: when it reached the drain the run resumes from.
    """

    def __init__(self, state: RunState, p: int, arrived: float | None = None) -> None:
        self.state, self.p, self.env = state, p, state.env
        self.remote = [int(m) != p for m in state.job.shard_machine]
        self.resume_at = arrived
        self.start = self.drained = 0.0

    def now(self) -> float:
        """The simulated clock."""
        return self.env.now

    def begin(self, t: int, prev_comm: float) -> Generator[Any, Any, None]:
        """A checkpoint's drain: wait until every worker is here (counted as waiting)."""
        st = self.state
        self.start, self.drained = self.env.now, 0.0
        if self.resume_at is not None:  # resumed: it waited at the drain since it arrived
            self.start, self.drained = self.resume_at, self.env.now - self.resume_at
            self.resume_at = None
        elif st.drains is not None and t > 0 and t % st.job.spec.checkpoint_every == 0:
            self.drained = yield from st.drains.drain(self.p, t, prev_comm)

    def pull(self, t: int) -> Generator[Any, Any, Pulled]:
        """Pull from every shard at once; the answers are then decoded on the device."""
        st, env, p, job = self.state, self.env, self.p, self.state.job
        touched = job.shards[0].pull_mode == "touched"
        keys = job.workers[p].touched_keys() if touched else [None] * len(job.shards)
        pulls = [Started(env, st.pull(p, s, t, keys[s])) for s in range(len(job.shards))]
        results = yield env.all_of(pulls)
        st.feed.close_step(p, t - 1)  # its pushes and this pull: the previous step's round
        served: list[Served] = [results[proc] for proc in pulls]
        wait = max(x.blocked for x in served) + self.drained
        down = tuple(x.down for x in served)
        remote_down = sum(x.remote for x in served)
        requests = [x.request for x in served]
        decode = sum(x.decode for x in served)
        figures: dict[str, Any] = {
            "up": [st.net.wire_bytes(len(r)) for r in requests],
            "extra": st.worker_state[p].extra,
            "codec": decode,
            "staleness": max(x.staleness for x in served),
        }
        if st.lossless:
            figures["lossless_up"] = sum(
                st.net.wire_bytes(snappy_bytes(r) if r else 0) for r in requests
            )
            figures["lossless_down"] = sum(x.lossless for x in served)
        # A round policy's budget of 0: the merged model, the run's last pull (the loop stops
        # on the same test of these answers); no migration, and its own time split.
        if budget_spent(st.worker_state[p].extra, st.rounds):
            if decode:
                yield env.timeout(decode)
            comm = env.now - self.start - wait - decode
            return Pulled(down=down, wait=wait, comm=comm, **figures)
        if st.moves is not None and st.moves.decides(t):
            # Keys may move once every pull is in: waiting for the others is wait, the move's
            # transfers are communication.
            wait += yield from st.moves.migration_point(t)
        pull_end = env.now
        if decode:  # the answers are decoded on the worker's device, one after the other
            yield env.timeout(decode)
        moved = 0  # keys moved to this machine: down traffic from their old shards (remote)
        moved_from = st.moves.migrated.pop((t, p), None) if st.moves is not None else None
        if moved_from is not None:
            down = tuple(int(b) for b in np.add(down, moved_from))
            moved = int(moved_from.sum())
            remote_down += moved
        return Pulled(
            down=down,
            wait=wait,
            comm=pull_end - self.start - wait,
            remote_down=remote_down,
            migration_bytes=moved,
            **figures,
        )

    def gradient(self, worker: Worker, t: int) -> Callable[[], tuple[float, Any]] | None:
        """The step's gradient from the run's batched gradients, where it batches them."""
        gradients = self.state.gradients
        return None if gradients is None else functools.partial(gradients.compute, worker, t)

    def step_cost(self, batch: Matrix) -> float:
        """The compute model's seconds for one gradient on ``batch``."""
        job = self.state.job
        return job.compute.seconds(job.model, batch)

    def computed(self, t: int, cost: float) -> float:
        """The modelled cost, stretched by the worker's speed factor (stragglers)."""
        return cost * self.state.job.speed.factor(self.p, t)

    def push(
        self, t: int, vector: np.ndarray, compute: float, report: RoundReport | None
    ) -> Generator[Any, Any, Pushed]:
        """Encode per shard on the device and push each as its encode is done.

        The ratio is the one the controller set for step ``t`` (shared by all workers). Under
        a barrier the controller has seen every step before ``t - 1`` by now, and ``t - 1``
        too once every worker's pull of ``t`` is in (a step is observed with its next pull).
        """
        st, env, p, job = self.state, self.env, self.p, self.state.job
        w = job.workers[p]
        ratio = st.ratio(t)
        ctxs, payloads = encode_pushes(job, w, t, ratio, st.worker_state[p].extra, vector)
        encode = [st.charges.worker_encode_s(w, s, pl, ctxs[s]) for s, pl in enumerate(payloads)]
        # The device: backward and the shards' encodes; pushes start as each is encoded.
        overlap = st.overlap and not st.rounds
        ready = [shard_ready(st.ready, k) for k in w.shard_keys] if overlap else []
        plan = step_timeline(env.now, compute, ready or [1.0] * len(payloads), encode, overlap)
        st.feed.open_step(p, t, compute)
        if st.moves is not None:
            st.moves.note_push(p, payloads, ctxs)
        wire = report.wire() if report is not None else None
        pushes = [
            Started(env, st.push(p, s, t, pl, ctxs[s], wire, plan.push_start[s]))
            for s, pl in enumerate(payloads)
        ]
        done = yield env.all_of([*pushes, env.timeout(max(0.0, plan.device_end - env.now))])
        sent = max(done[proc] for proc in pushes)
        extra_up = REPORT_BYTES if report is not None else 0
        return Pushed(
            up=[st.net.wire_bytes(pl.wire_bytes + extra_up) for pl in payloads],
            ratio=ratio,
            comm=max(0.0, sent - plan.device_end),  # the push's time beyond the device's
            round_comm=sent - min(plan.push_start),
            codec=plan.encode_s,
            lossless_up=sum(st.net.wire_bytes(snappy_bytes(pl) + extra_up) for pl in payloads)
            if st.lossless
            else None,
        )

    def record(self, t: int, row: dict[str, Any]) -> None:
        """Keep the row; feed the dynamic placement its traffic and progress its step."""
        st = self.state
        st.rows.append(row)
        if st.moves is not None:
            st.moves.observe_traffic(self.p)
        st.progress.tick(t, self.env.now)

    def last_row(self) -> dict[str, Any]:
        """This worker's last row among the run's."""
        return next(r for r in reversed(self.state.rows) if r["worker"] == self.p)
