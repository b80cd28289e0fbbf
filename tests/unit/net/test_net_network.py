from __future__ import annotations

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from psml_core.net import FairShareNetwork, max_min_rates


def run_transfers(transfers, *, machines=4, bw=1000.0, lat=0.0, ovh=0.0, header=0, window=0.0):
    """Start (start_time, src, dst, nbytes) transfers; return their arrival times."""
    env = simpy.Environment()
    net = FairShareNetwork(env, machines, bw, lat, ovh, header, rate_window_s=window)
    done = {}

    def one(i, start, src, dst, nbytes):
        yield env.timeout(start)
        yield net.transfer(src, dst, nbytes)
        done[i] = env.now

    for i, tr in enumerate(transfers):
        env.process(one(i, *tr))
    env.run()
    return [done[i] for i in range(len(transfers))]


def test_single_message_cost():
    (t,) = run_transfers([(0.0, 0, 1, 500)], lat=0.01, ovh=0.002, header=100)
    assert t == pytest.approx(0.002 + 600 / 1000 + 0.01)


def test_wire_efficiency_stretches_the_transfer_but_not_the_recorded_bytes():
    """TCP/IPv4 at MTU 1500: 1448 payload bytes per 1500 on the link; records keep the bytes."""
    env = simpy.Environment()
    net = FairShareNetwork(env, 2, 1000.0, 0.01, 0.002, 100, efficiency=1448 / 1500)
    proc = net.transfer(0, 1, 500)
    env.run(proc)
    assert env.now == pytest.approx(0.002 + 600 * 1500 / 1448 / 1000 + 0.01)
    assert net.wire_bytes(500) == 600


def test_incast_shares_the_server_ingress():
    # Three workers push 100 B each to machine 3: its ingress is the bottleneck.
    times = run_transfers([(0.0, p, 3, 100) for p in range(3)])
    assert times == pytest.approx([0.3, 0.3, 0.3])


def test_short_flow_leaves_and_long_flow_speeds_up():
    times = run_transfers([(0.0, 0, 2, 100), (0.0, 1, 2, 300)])
    # Both at 500 B/s until the short one ends at 0.2 s; the long one has 200 B left at 1000 B/s.
    assert times == pytest.approx([0.2, 0.4])


def test_disjoint_paths_do_not_interfere():
    times = run_transfers([(0.0, 0, 1, 100), (0.0, 2, 3, 100)])
    assert times == pytest.approx([0.1, 0.1])


def test_colocated_message_is_free():
    assert run_transfers([(0.0, 1, 1, 10**9)], lat=1.0, ovh=1.0) == [0.0]


def test_late_joiner():
    # Flow A alone for 0.1 s (100 B done), then shares with B.
    times = run_transfers([(0.0, 0, 2, 300), (0.1, 1, 2, 100)])
    assert times == pytest.approx([0.4, 0.3])


def test_max_min_textbook_example():
    # Links 0 and 1 of capacity 1: A uses 0, B uses 0 and 1, C uses 1.
    rates = max_min_rates({0: (0,), 1: (0, 1), 2: (1,)}, {0: 1.0, 1: 1.0})
    assert rates == pytest.approx({0: 0.5, 1: 0.5, 2: 0.5})
    # Capacity 2 on link 1: B is held at 0.5 by link 0, so C gets the remaining 1.5.
    rates = max_min_rates({0: (0,), 1: (0, 1), 2: (1,)}, {0: 1.0, 1: 2.0})
    assert rates == pytest.approx({0: 0.5, 1: 0.5, 2: 1.5})


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=12))
def test_max_min_is_feasible_and_saturates_a_link_per_flow(pairs):
    flows = {i: (s, 4 + d) for i, (s, d) in enumerate(pairs)}
    cap = {link: 10.0 for link in range(8)}
    rates = max_min_rates(flows, cap)
    load = {link: 0.0 for link in cap}
    for fid, links in flows.items():
        for link in links:
            load[link] += rates[fid]
    assert all(load[link] <= cap[link] * (1 + 1e-9) for link in cap)
    # Max-min: each flow crosses a saturated link where it has the largest rate.
    for fid, links in flows.items():
        assert any(
            load[link] >= cap[link] * (1 - 1e-9)
            and rates[fid] >= max(rates[g] for g, ls in flows.items() if link in ls) * (1 - 1e-9)
            for link in links
        )


def test_deterministic():
    trs = [(0.01 * i, i % 3, 3, 100 + 37 * i) for i in range(20)]
    assert run_transfers(trs) == run_transfers(trs)


def test_bandwidth_step_mid_flow():
    env = simpy.Environment()
    net = FairShareNetwork(env, 2, 1000.0, 0.0, 0.0, 0, bandwidth_steps=((0.5, 100.0),))
    done = {}

    def one():
        yield net.transfer(0, 1, 600)
        done["t"] = env.now

    env.process(one())
    env.run()
    # 500 B in the first 0.5 s at 1000 B/s, the last 100 B at 100 B/s.
    assert done["t"] == pytest.approx(1.5)


def test_extra_delay_adds_to_latency():
    env = simpy.Environment()
    net = FairShareNetwork(env, 2, 1000.0, 0.01, 0.0)
    done = {}

    def one():
        yield net.transfer(0, 1, 100, extra_delay_s=0.2)
        done["t"] = env.now

    env.process(one())
    env.run()
    assert done["t"] == pytest.approx(0.1 + 0.01 + 0.2)


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=40),
    st.lists(st.floats(1.0, 100.0), min_size=12, max_size=12),
)
def test_vectorised_rates_equal_the_reference(pairs, caps):
    import numpy as np

    from psml_core.net.network import two_link_rates

    src = np.array([s for s, _ in pairs])
    dst = np.array([6 + d for _, d in pairs])
    ref = max_min_rates(
        {i: (int(a), int(b)) for i, (a, b) in enumerate(zip(src, dst, strict=True))},
        dict(enumerate(caps)),
    )
    fast = two_link_rates(src, dst, np.array(caps))
    assert fast == pytest.approx([ref[i] for i in range(len(pairs))], rel=1e-9)


def test_per_machine_bandwidth_and_latency():
    env = simpy.Environment()
    net = FairShareNetwork(
        env, 3, 1000.0, 0.01, 0.0, nic_bandwidth={2: 100.0}, nic_latency={1: 0.5}
    )
    done = {}

    def one(name, src, dst, nbytes):
        yield net.transfer(src, dst, nbytes)
        done[name] = env.now

    env.process(one("slow-nic", 0, 2, 100))  # machine 2's ingress: 100 B/s
    env.process(one("far", 0, 1, 100))  # machine 1's latency: 0.5 s
    env.run()
    # Max-min: the flow into machine 2 is held at 100 B/s by its NIC, the other gets the rest
    # of machine 0's egress (900 B/s) and then the larger endpoint latency (0.5 s).
    assert done["slow-nic"] == pytest.approx(100 / 100 + 0.01)
    assert done["far"] == pytest.approx(100 / 900 + 0.5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("start", [1e3, 1e5, 1e7])
def test_tiny_remainders_late_in_a_long_run_still_finish(start):
    """Late in a run `now + dt == now` for the last rounding remainder of a flow: the network
    must finish such a flow rather than wake up forever at the same instant (a real hang seen
    with 100 ms Markov delays and 8-byte top-k payloads)."""
    env = simpy.Environment(initial_time=start)
    net = FairShareNetwork(env, machines=3, bandwidth_Bps=1.25e9, latency_s=0.0, overhead_s=0.0)
    net._last = start
    ends: list[float] = []

    def send(src, dst, nbytes, wait):
        yield env.timeout(wait)
        yield net.transfer(src, dst, nbytes)
        ends.append(env.now)

    # Odd sizes and staggered starts leave sub-byte remainders when the shares change.
    for i, (nbytes, wait) in enumerate([(8, 0.0), (1001, 3e-10), (7, 7e-10), (12345, 1e-9)]):
        env.process(send(i % 2, 2, nbytes, wait))
    env.run()
    assert len(ends) == 4 and all(t >= start for t in ends)


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=40),
    st.lists(st.floats(1.0, 100.0), min_size=12, max_size=12),
    st.lists(st.integers(0, 6), min_size=12, max_size=12),
)
def test_vectorised_rates_with_competing_flows_equal_the_reference(pairs, caps, competing):
    """Cross-traffic: each competing flow is a one-link flow of unbounded demand."""
    import numpy as np

    from psml_core.net.network import two_link_rates

    flows: dict[int, tuple[int, ...]] = {i: (s, 6 + d) for i, (s, d) in enumerate(pairs)}
    for link, c in enumerate(competing):
        for _ in range(c):
            flows[len(flows)] = (link,)
    ref = max_min_rates(flows, dict(enumerate(caps)))
    fast = two_link_rates(
        np.array([s for s, _ in pairs]),
        np.array([6 + d for _, d in pairs]),
        np.array(caps),
        np.array(competing),
    )
    assert fast == pytest.approx([ref[i] for i in range(len(pairs))], rel=1e-9)
    # Feasible, and no message beats the competitors on a link it saturates.
    load = np.bincount(
        [link for i in range(len(pairs)) for link in flows[i]],
        weights=[fast[i] for i in range(len(pairs)) for _ in flows[i]],
        minlength=12,
    )
    comp_rate = {link: ref[i] for i, ls in flows.items() if len(ls) == 1 for link in ls}
    load += np.array([competing[k] * comp_rate.get(k, 0.0) for k in range(12)])
    assert (load <= np.array(caps) * (1 + 1e-9)).all()


def test_competing_flows_take_their_share():
    import numpy as np

    from psml_core.net.network import two_link_rates

    # One message 0 -> ingress 3, 2 competitors on link 0, 1 on link 3: 1/3 of link 0.
    rates = two_link_rates(np.array([0]), np.array([3]), np.full(4, 900.0), np.array([2, 0, 0, 1]))
    assert rates == pytest.approx([300.0])
    # Competitors on links no message uses change nothing.
    rates = two_link_rates(np.array([0]), np.array([3]), np.full(4, 900.0), np.array([0, 7, 7, 0]))
    assert rates == pytest.approx([900.0])


# --------------------------------------------------------------------------- the rate window


def test_a_lone_message_is_exact_under_a_rate_window():
    """The first change after a quiet window is applied at once: a lone message is exact."""
    exact = run_transfers([(0.0, 0, 1, 500), (2.0, 0, 1, 500)], lat=0.01, ovh=0.002)
    # The second message starts 1.4 s after the first ended, well inside a 5 s window: the
    # network went idle in between, so it starts a fresh window.
    assert run_transfers([(0.0, 0, 1, 500), (2.0, 0, 1, 500)], lat=0.01, ovh=0.002,
                         window=5.0) == exact  # fmt: skip


def test_a_window_of_zero_is_the_exact_model():
    flows = [(0.0, 0, 3, 300), (0.05, 1, 3, 100), (0.07, 2, 3, 50), (0.3, 0, 2, 80)]
    assert run_transfers(flows, window=0.0) == run_transfers(flows)


@given(
    st.lists(
        st.tuples(st.floats(0.0, 0.5), st.integers(0, 2), st.integers(1, 400)),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([1e-4, 1e-3, 1e-2]),
)
def test_an_incast_under_a_window_is_late_by_at_most_a_window_per_message(flows, window):
    """One bottleneck (machine 3's ingress): the exact model is work-conserving, and a window
    idles the link for at most one window per message that ends (its bandwidth reaches the
    others late), so the last arrival is never early and at most n windows late."""
    transfers = [(start, src, 3, nbytes) for start, src, nbytes in flows]
    exact = max(run_transfers(transfers))
    late = max(run_transfers(transfers, window=window))
    assert exact - 1e-9 <= late <= exact + len(flows) * window + 1e-9


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=24),
    st.lists(st.floats(1.0, 100.0), min_size=12, max_size=12),
    st.one_of(st.none(), st.lists(st.integers(0, 4), min_size=12, max_size=12)),
)
def test_a_few_flows_on_python_floats_are_bit_identical_to_the_compiled_kernel(
    pairs, caps, competing
):
    """The small-set path does the compiled kernel's arithmetic in its order: the same floats."""
    import numpy as np

    from psml_core.net import fair_share

    src = np.array([s for s, _ in pairs])
    dst = np.array([6 + d for _, d in pairs])
    comp = None if competing is None else np.array(competing)
    few = fair_share.two_link_rates(src, dst, np.array(caps), comp)
    assert src.size <= fair_share._FEW_FLOWS
    compiled = fair_share.load_kernel()(
        src.astype(np.int64),
        dst.astype(np.int64),
        np.array(caps, dtype=np.float64),
        np.zeros(12, dtype=np.int64) if comp is None else comp.astype(np.int64),
        np.empty(src.size),
    )
    assert few.tolist() == compiled.tolist()


@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=25, max_size=300),
    st.lists(st.floats(1.0, 100.0), min_size=16, max_size=16),
    st.one_of(st.none(), st.lists(st.integers(0, 4), min_size=16, max_size=16)),
)
def test_many_flows_take_the_compiled_kernel_with_the_python_floats(pairs, caps, competing):
    """Above 24 flows: the compiled kernel's floats are the Python path's, bit for bit.

    (Numba with ``fastmath`` would contract ``cap - level * n`` into a fused multiply-add and
    reorder the reductions: different floats, which this catches.)
    """
    import numpy as np

    from psml_core.net import fair_share

    src = np.array([s for s, _ in pairs])
    dst = np.array([8 + d for _, d in pairs])
    comp = None if competing is None else np.array(competing)
    assert src.size > fair_share._FEW_FLOWS
    compiled = fair_share.two_link_rates(src, dst, np.array(caps), comp)
    python = fair_share._few_flow_rates(src.tolist(), dst.tolist(), np.array(caps), comp)
    assert compiled.tolist() == python
    flows: dict[int, tuple[int, ...]] = {i: (s, 8 + d) for i, (s, d) in enumerate(pairs)}
    for link, n in enumerate(competing or ()):
        for _ in range(n):
            flows[len(flows)] = (link,)
    ref = max_min_rates(flows, dict(enumerate(caps)))
    assert compiled == pytest.approx([ref[i] for i in range(len(pairs))], rel=1e-9)


def test_a_link_out_of_range_is_an_error_not_a_stray_write():
    import numpy as np

    from psml_core.net import fair_share

    src = np.zeros(30, dtype=np.int64)
    dst = np.ones(30, dtype=np.int64)
    for bad in (-1, 2):
        wrong = dst.copy()
        wrong[7] = bad
        with pytest.raises(ValueError, match="link"):
            fair_share.two_link_rates(src, wrong, np.ones(2))
    with pytest.raises(ValueError, match="competing"):
        fair_share.two_link_rates(src, dst, np.ones(2), np.zeros(3, dtype=np.int64))


def test_an_unreadable_kernel_cache_costs_a_compilation_not_the_run(monkeypatch, caplog):
    """A cache Numba cannot read (or write) makes the kernel compile in memory, with a warning."""
    import numba
    import numpy as np

    from psml_core.net import fair_share

    real = numba.njit
    tries = []

    def njit(**options):
        tries.append(options["cache"])
        compiled = real(**options)

        def wrap(fn):
            kernel = compiled(fn)
            if options["cache"]:

                def truncated(*args):
                    raise EOFError("Ran out of input")  # what a half-written index raises

                return truncated
            return kernel

        return wrap

    monkeypatch.setattr(numba, "njit", njit)
    fair_share.load_kernel.cache_clear()
    try:
        kernel = fair_share.load_kernel()
        rates = kernel(
            np.array([0, 1]), np.array([2, 2]), np.ones(3), np.zeros(3, np.int64), np.empty(2)
        )
    finally:
        fair_share.load_kernel.cache_clear()
        monkeypatch.undo()
        fair_share.load_kernel()  # the cached kernel again, for the tests after this one
    assert tries == [True, False]
    assert rates.tolist() == [0.5, 0.5]
    assert "Numba's cache for the fair-share kernel is unusable (EOFError" in caplog.text
