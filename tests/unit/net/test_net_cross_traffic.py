from __future__ import annotations

import math
import random

import numpy as np
import pytest
import simpy

from psml_core.errors import ConfigError, DataError
from psml_core.net.cross_traffic import CROSS_TRAFFIC, CrossTraffic, make_cross_traffic
from psml_core.net.network import FairShareNetwork

MARKOV = {"kind": "markov", "flows": [0, 9], "switch_prob": 0.05, "period_ms": 100.0}


def run_transfers(transfers, *, ct=None, machines=4, bw=1000.0, lat=0.0, ovh=0.0, start=0.0):
    """Start (start_time, src, dst, nbytes) transfers; return their arrival times and the net."""
    env = simpy.Environment(initial_time=start)
    net = FairShareNetwork(env, machines, bw, lat, ovh, cross_traffic=ct)
    done = {}

    def one(i, at, src, dst, nbytes):
        yield env.timeout(at - start)
        yield net.transfer(src, dst, nbytes)
        done[i] = env.now

    for i, tr in enumerate(transfers):
        env.process(one(i, *tr))
    env.run()
    return [done[i] for i in range(len(transfers))], net


def write_trace(tmp_path, rows, name="ct.csv"):
    path = tmp_path / name
    path.write_text("time_s,flows\n" + "".join(f"{t},{n}\n" for t, n in rows))
    return str(path)


def lone_finish(ct, machines, src, dst, size, bw, t0):
    """By hand: a message alone on its path moves at B / (c + 1) on its busier link."""
    t, left = t0, float(size)
    while True:
        c = ct.link_flows(t)
        rate = bw / (max(c[src], c[machines + dst]) + 1)
        nxt = ct.next_change(t)
        if left <= rate * (nxt - t):
            return t + left / rate
        left -= rate * (nxt - t)
        t = nxt


def schedule(ct, until):
    """The change times and the link counts after each, from time 0 to ``until``."""
    t, out = 0.0, [(0.0, tuple(ct.link_flows(0.0)))]
    while (t := ct.next_change(t)) < until:
        out.append((t, tuple(ct.link_flows(t))))
    return out


# ----------------------------------------------------------------------------- the registry


def test_none_is_no_cross_traffic():
    assert make_cross_traffic(None, 0, 4) is None
    assert make_cross_traffic({}, 0, 4) is None


def test_unknown_kind_lists_the_known_ones():
    with pytest.raises(ConfigError, match="known cross-traffic kinds: constant, markov"):
        make_cross_traffic({"kind": "nope"}, 0, 4)
    with pytest.raises(ConfigError, match="needs a 'kind'"):
        make_cross_traffic({"flows": 3}, 0, 4)
    assert {"constant", "markov", "poisson", "trace"} <= set(CROSS_TRAFFIC.names())


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "constant", "flows": -1},
        {"kind": "constant", "flows": 1.5},
        {"kind": "constant", "bogus": 1},
        {"kind": "markov", "flows": [0]},
        {"kind": "markov", "flows": [0, -2]},
        {"kind": "markov", "switch_prob": 1.5},
        {"kind": "markov", "period_ms": 0},
        {"kind": "markov", "scope": "per_link"},
        {"kind": "poisson", "mean": -1},
    ],
)
def test_bad_params_are_config_errors(spec):
    with pytest.raises(ConfigError):
        make_cross_traffic(spec, 0, 4)


# ----------------------------------------------------------------------------- the processes


def test_constant():
    ct = make_cross_traffic({"kind": "constant", "flows": 3}, 0, 4)
    assert isinstance(ct, CrossTraffic)
    assert ct.link_flows(123.4).tolist() == [3] * 8
    assert ct.at(2, 0.0) == (3, 3)
    assert ct.next_change(0.0) == math.inf


def test_markov_starts_low_and_switches_at_the_right_rate():
    ct = make_cross_traffic({**MARKOV, "scope": "shared"}, 1, 4)
    assert ct.link_flows(0.0).tolist() == [0] * 8
    horizon = 20000 * 0.1  # 20000 periods
    sched = schedule(ct, horizon)
    switches = len(sched) - 1
    assert 0.045 < switches / 20000 < 0.055
    # Every change is a real switch between the two states, on a period boundary.
    states = [s[0] for _, s in sched]
    assert set(states) == {0, 9} and all(a != b for a, b in zip(states, states[1:], strict=False))
    times = np.array([t for t, _ in sched[1:]])
    assert np.allclose(times / 0.1, np.round(times / 0.1))
    # The chain is symmetric: about half the time in each state.
    ends = np.append(times, horizon)
    starts = np.insert(times, 0, 0.0)
    high = sum(e - s for s, e, st in zip(starts, ends, states, strict=True) if st == 9)
    assert 0.4 < high / horizon < 0.6


def test_markov_per_machine_chains_are_independent_and_keyed_by_machine():
    spec = {**MARKOV, "scope": "per_machine"}
    small, big = make_cross_traffic(spec, 5, 4), make_cross_traffic(spec, 5, 8)
    ts = np.linspace(0.0, 500.0, 997)
    a = np.array([small.link_flows(t) for t in ts])
    b = np.array([big.link_flows(t) for t in ts])
    # Machine m's chain depends on (seed, m) only, and drives its egress and ingress alike.
    assert (a[:, :4] == b[:, :4]).all() and (a[:, 4:] == a[:, :4]).all()
    assert not (a[:, 0] == a[:, 1]).all()
    assert small.at(1, 250.0) == (int(a[ts.searchsorted(250.0), 1]),) * 2


def test_same_seed_same_schedule_in_any_query_order():
    spec = {**MARKOV, "scope": "per_machine"}
    ts = [float(t) for t in np.random.default_rng(0).uniform(0.0, 2000.0, 300)]
    ref = make_cross_traffic(spec, 7, 3)
    expected = {t: (ref.link_flows(t).tolist(), ref.next_change(t)) for t in sorted(ts)}
    shuffled = ts[:]
    random.Random(1).shuffle(shuffled)
    again = make_cross_traffic(spec, 7, 3)
    for t in shuffled:
        assert (again.link_flows(t).tolist(), again.next_change(t)) == expected[t]
    other = make_cross_traffic(spec, 8, 3)
    assert [other.link_flows(t).tolist() for t in sorted(ts)] != [e[0] for e in expected.values()]


def test_counts_hold_between_changes():
    ct = make_cross_traffic({**MARKOV, "scope": "per_machine", "switch_prob": 0.2}, 2, 3)
    sched = schedule(ct, 100.0)
    probe = make_cross_traffic({**MARKOV, "scope": "per_machine", "switch_prob": 0.2}, 2, 3)
    for (t0, counts), (t1, after) in zip(sched, sched[1:], strict=False):
        assert counts != after
        for t in (t0, (t0 + t1) / 2, np.nextafter(t1, 0.0)):
            assert tuple(probe.link_flows(t)) == counts


def test_static_chains_never_wake():
    for spec in (
        {**MARKOV, "switch_prob": 0.0},
        {**MARKOV, "flows": [4, 4]},
        {"kind": "poisson", "mean": 0},
    ):
        ct = make_cross_traffic(spec, 0, 2)
        assert ct.next_change(1e6) == math.inf
        assert ct.link_flows(1e6).tolist() == ct.link_flows(0.0).tolist()


def test_poisson_mean_and_period():
    ct = make_cross_traffic({"kind": "poisson", "mean": 2.0, "period_ms": 10.0}, 3, 2)
    draws = np.array([ct.link_flows(0.005 + 0.01 * k)[0] for k in range(20000)])
    assert abs(draws.mean() - 2.0) < 0.05 and abs(draws.var() - 2.0) < 0.1
    # It wakes only where the draw changes, never on a period with the same draw.
    changes = len(schedule(ct, 200.0)) - 1
    assert changes == np.count_nonzero(np.diff(draws))


def test_trace(tmp_path):
    path = write_trace(tmp_path, [(1.0, 2), (2.0, 2), (3.5, 0), (5.0, 4)])
    ct = make_cross_traffic({"kind": "trace", "path": path}, 0, 2)
    assert ct.link_flows(0.0).tolist() == [2] * 4  # before the first row: its count
    assert [ct.at(0, t)[0] for t in (1.0, 2.5, 3.5, 4.9, 5.0, 99.0)] == [2, 2, 0, 0, 4, 4]
    # Row 2.0 repeats its count: no change there.
    assert [ct.next_change(t) for t in (0.0, 1.0, 3.5, 5.0)] == [3.5, 3.5, 5.0, math.inf]


@pytest.mark.parametrize(
    "body",
    ["time_s,flows\n", "t,n\n0,1\n", "time_s,flows\n0,x\n", "time_s,flows\n1,1\n0,2\n"],
)
def test_bad_traces(tmp_path, body):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(DataError):
        make_cross_traffic({"kind": "trace", "path": str(path)}, 0, 2)
    with pytest.raises(DataError, match="does not exist"):
        make_cross_traffic({"kind": "trace", "path": str(tmp_path / "missing.csv")}, 0, 2)


# ----------------------------------------------------------------------------- in the network


@pytest.mark.parametrize("c", [0, 1, 3, 9])
def test_one_message_with_c_competing_flows(c):
    ct = make_cross_traffic({"kind": "constant", "flows": c}, 0, 4)
    (t,), _ = run_transfers([(0.0, 0, 1, 500)], ct=ct, lat=0.01, ovh=0.002)
    assert t == pytest.approx(0.002 + 500 * (c + 1) / 1000 + 0.01)


def test_competition_changes_mid_transfer(tmp_path):
    ct = make_cross_traffic(
        {"kind": "trace", "path": write_trace(tmp_path, [(0.0, 0), (0.5, 3)])}, 0, 2
    )
    (t,), _ = run_transfers([(0.0, 0, 1, 1000)], ct=ct, machines=2)
    # 500 B alone in the first 0.5 s, then the last 500 B at 1000 / 4 B/s.
    assert t == pytest.approx(0.5 + 500 / 250)


def test_two_messages_and_competition_on_a_shared_ingress():
    ct = make_cross_traffic({"kind": "constant", "flows": 2}, 0, 3)
    times, _ = run_transfers([(0.0, 0, 2, 100), (0.0, 1, 2, 300)], ct=ct, machines=3)
    # Ingress 2 holds 2 messages + 2 competitors: 250 B/s each, the short one done at 0.4 s.
    # Then the long one (200 B left) has 1 + 2 flows on both its links: 1000 / 3 B/s.
    assert times == pytest.approx([0.4, 0.4 + 200 / (1000 / 3)])


def test_competition_only_on_the_receivers_link(tmp_path):
    # Per machine chains: only the links of the message's own machines count.
    spec = {**MARKOV, "scope": "per_machine", "switch_prob": 0.3}
    ct = make_cross_traffic(spec, 11, 4)
    (t,), _ = run_transfers([(0.0, 2, 3, 20000)], ct=ct)
    assert t == pytest.approx(lone_finish(make_cross_traffic(spec, 11, 4), 4, 2, 3, 20000, 1e3, 0))


@pytest.mark.parametrize("scope", ["shared", "per_machine"])
def test_markov_transfer_matches_the_hand_integral(scope):
    spec = {**MARKOV, "scope": scope, "switch_prob": 0.2}
    ct = make_cross_traffic(spec, 4, 4)
    times, net = run_transfers([(0.0, 0, 1, 30000), (100.0, 3, 2, 30000)], ct=ct)
    hand = make_cross_traffic(spec, 4, 4)
    assert times[0] == pytest.approx(lone_finish(hand, 4, 0, 1, 30000, 1e3, 0.0), rel=1e-9)
    assert times[1] == pytest.approx(lone_finish(hand, 4, 3, 2, 30000, 1e3, 100.0), rel=1e-9)
    # The network woke at changes of competition and completions only, never per period.
    changes = sum(
        1 for t, _ in schedule(hand, times[1]) if 0 < t <= times[0] or 100.0 < t <= times[1]
    )
    assert net._generation <= changes + 2


def test_the_simulation_ends_and_zero_competition_changes_nothing():
    trs = [(0.013 * i, i % 3, 3, 100 + 37 * i) for i in range(20)]
    plain, _ = run_transfers(trs)
    zero, _ = run_transfers(trs, ct=make_cross_traffic({"kind": "constant", "flows": 0}, 0, 4))
    assert zero == plain
    # A cross-traffic process schedules nothing while the network is idle: run() returns.
    env = simpy.Environment()
    net = FairShareNetwork(env, 2, 1e3, 0.0, 0.0, cross_traffic=make_cross_traffic(MARKOV, 0, 2))
    net.transfer(0, 1, 100)
    env.run()
    assert env.now < 10.0


def test_deterministic_with_cross_traffic():
    trs = [(0.05 * i, i % 3, 3 - i % 2, 1000 + 37 * i) for i in range(40)]
    spec = {**MARKOV, "scope": "per_machine", "switch_prob": 0.3}
    a, _ = run_transfers(trs, ct=make_cross_traffic(spec, 9, 4))
    b, _ = run_transfers(trs, ct=make_cross_traffic(spec, 9, 4))
    assert a == b


@pytest.mark.parametrize("scope", ["shared", "per_machine"])
def test_a_resumed_network_sees_the_same_competition(scope):
    spec = {**MARKOV, "scope": scope, "switch_prob": 0.2}
    trs = [(37.3 + 0.01 * i, i % 2, 2 + i % 2, 5000 + 100 * i) for i in range(6)]
    # One run from time 0, busy through the first 30 s, and one constructed at 37.3 s (idle
    # before), as after a resume from a checkpoint.
    early = [(3.0 * i, i % 4, (i + 1) % 4, 200) for i in range(10)]
    full, _ = run_transfers(early + trs, ct=make_cross_traffic(spec, 3, 4))
    assert max(full[: len(early)]) < 37.3
    resumed, _ = run_transfers(trs, ct=make_cross_traffic(spec, 3, 4), start=37.3)
    assert resumed == pytest.approx(full[len(early) :], rel=1e-12)
    # And the competition itself, first asked at the resume time.
    fresh = make_cross_traffic(spec, 3, 4)
    assert (
        fresh.link_flows(40.0).tolist() == make_cross_traffic(spec, 3, 4).link_flows(40.0).tolist()
    )


def test_compression_shortens_the_delay_under_competition():
    """The property DC2 relies on: the transfer time falls with the bytes sent."""
    spec = {**MARKOV, "scope": "shared", "switch_prob": 0.1}
    hand = make_cross_traffic(spec, 6, 4)
    # A time in the high state (9 competitors): a dense message there takes 10x its bare time.
    t_high = next(t for t, s in schedule(hand, 1000.0) if s[0] == 9)
    dense, sparse = 4000, 40  # bytes: a 100x compression
    (t_dense, t_sparse), _ = run_transfers(
        [(t_high, 0, 1, dense), (t_high, 2, 3, sparse)], ct=make_cross_traffic(spec, 6, 4)
    )
    assert t_sparse < t_dense
    assert t_sparse - t_high == pytest.approx(sparse * 10 / 1000)
    assert t_dense == pytest.approx(lone_finish(hand, 4, 0, 1, dense, 1e3, t_high))
    # Unlike a byte-independent delay, the competition's cost scales with the bytes sent.
    assert t_dense - t_high > 10 * (t_sparse - t_high)
