"""EtcdElector on a real 3-member etcd cluster: fair split, handover, dead and paused leaders,
and the loss of etcd members.

Electors step every ttl/10 (0.2 s) as a scheduler loop would, on threads of the test process or
in child processes that a test can SIGKILL or SIGSTOP. Every step is recorded, and each test
checks that no two holders ever claimed one partition at the same instant (see
tests/services/etcd_electors.py). Each test takes a few seconds.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chronoq.coordination import Leadership
from chronoq.errors import ConfigError, CoordinationUnavailable
from chronoq.tier.etcd import EtcdElector
from tests.helpers import wait_until
from tests.services.etcd import EtcdCluster
from tests.services.etcd_electors import (
    ElectorLoop,
    ElectorProcess,
    StepLog,
    balanced,
    check_no_overlap,
)

PARTITIONS = 16
TTL = 2.0
INTERVAL = TTL / 10
WAIT = 15.0  # the longest any condition may take to hold before a test fails
CHILD_START = 30.0  # a child process imports chronoq before its first step
STEP_SLACK = 0.3  # what a step may run past its budget of ttl/2 (the last request's overrun)


class Electors:
    """The electors of one test and the log of their steps; all closed at teardown."""

    def __init__(self, cluster: EtcdCluster, prefix: str) -> None:
        self.cluster = cluster
        self.prefix = prefix
        self.log = StepLog()
        self.loops: dict[str, ElectorLoop] = {}
        self.children: dict[str, ElectorProcess] = {}

    def elector(self, holder: str, endpoints: list[str] | None = None) -> EtcdElector:
        chosen = endpoints or self.cluster.endpoints
        return EtcdElector(chosen, holder, PARTITIONS, ttl=TTL, prefix=self.prefix)

    def start(self, holder: str, endpoints: list[str] | None = None) -> ElectorLoop:
        loop = ElectorLoop(self.elector(holder, endpoints), self.log, INTERVAL).start()
        self.loops[holder] = loop
        return loop

    def spawn(self, holder: str) -> ElectorProcess:
        child = ElectorProcess(
            self.log, self.cluster.endpoints, holder, PARTITIONS, TTL, self.prefix, INTERVAL
        )
        self.children[holder] = child
        return child

    def leave(self, holder: str) -> None:
        self.loops.pop(holder).close()

    def wait_balanced(self, *holders: str, timeout: float = WAIT) -> float:
        return self.log.wait_for(
            lambda: balanced(self.log, holders, PARTITIONS),
            timeout,
            f"{', '.join(holders)} to split the partitions evenly",
        )

    def wait_leads(self, holder: str, count: int, timeout: float = WAIT) -> float:
        return self.log.wait_for(
            lambda: len(self.log.led(holder)) == count,
            timeout,
            f"{holder} to lead {count} partitions",
        )

    def close(self) -> None:
        for loop in self.loops.values():
            loop.close()
        for child in self.children.values():
            child.close()


@pytest.fixture
def electors(etcd_cluster: EtcdCluster, etcd_prefix: str) -> Iterator[Electors]:
    opened = Electors(etcd_cluster, etcd_prefix)
    yield opened
    opened.close()
    check_no_overlap(opened.log.steps)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Settings


@pytest.mark.parametrize(
    "endpoint",
    ["127.0.0.1:2379", "ftp://127.0.0.1:2379", "http://127.0.0.1", "http://:2379",
     "http://127.0.0.1:2379/v3", "http://127.0.0.1:port", ""],
)  # fmt: skip
def test_a_bad_endpoint_is_a_config_error_naming_it(endpoint: str) -> None:
    with pytest.raises(ConfigError, match="http://host:port") as raised:
        EtcdElector(["http://127.0.0.1:2379", endpoint], "a", PARTITIONS)
    assert repr(endpoint) in str(raised.value)


def test_no_endpoints_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="endpoints"):
        EtcdElector([], "a", PARTITIONS)
    with pytest.raises(ConfigError, match="endpoints"):
        EtcdElector("http://127.0.0.1:2379", "a", PARTITIONS)  # a string, not a list


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"ttl": 0.5}, "ttl"),
        ({"ttl": float("nan")}, "ttl"),
        ({"holder": ""}, "holder"),
        ({"holder": "a/b"}, "holder"),
        ({"partitions": 0}, "partitions"),
        ({"prefix": "/"}, "prefix"),
    ],
)
def test_bad_settings_are_config_errors_naming_them(options: dict[str, object], named: str) -> None:
    settings: dict[str, object] = {"holder": "a", "partitions": PARTITIONS, **options}
    with pytest.raises(ConfigError, match=named):
        EtcdElector(["http://127.0.0.1:2379"], **settings)  # type: ignore[arg-type]


# Unreachable etcd (no cluster needed: nothing listens on the ports)


def test_unreachable_etcd_leads_nothing_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    endpoints = [f"http://127.0.0.1:{_closed_port()}" for _ in range(2)]
    elector = EtcdElector(endpoints, "a", PARTITIONS, ttl=TTL, prefix="unreachable")
    with caplog.at_level(logging.WARNING, logger="chronoq.coordination"):
        assert [elector.step() for _ in range(3)] == [{}, {}, {}]
    warnings = [r for r in caplog.records if r.name.startswith("chronoq.coordination")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].exc_info is None
    assert "connection refused" in warnings[0].getMessage()
    with pytest.raises(CoordinationUnavailable, match="etcd cannot be reached"):
        elector.leaders()
    elector.close()


# Answers of the wrong shape (a proxy's page, a different API): a failed request of that member

MALFORMED = [b"[]", b"{}", b'{"ID": null, "result": []}', b"<html>not json</html>"]


@pytest.fixture(params=MALFORMED, ids=["list", "empty", "nulls", "html"])
def malformed_endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    """http://127.0.0.1:port of a server that answers every POST 200 with `request.param`."""
    body: bytes = request.param

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_an_answer_of_the_wrong_shape_is_a_failed_request(
    malformed_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    elector = EtcdElector([malformed_endpoint], "a", PARTITIONS, ttl=TTL, prefix="malformed")
    with caplog.at_level(logging.WARNING, logger="chronoq.coordination"):
        assert [elector.step() for _ in range(2)] == [{}, {}]
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("chronoq.")]
    assert len(warnings) == 1, warnings
    assert malformed_endpoint in warnings[0]
    elector.close()


def test_a_member_answering_the_wrong_shape_is_skipped_for_the_next(
    malformed_endpoint: str, etcd_cluster: EtcdCluster, etcd_prefix: str
) -> None:
    endpoints = [malformed_endpoint, *etcd_cluster.endpoints]
    elector = EtcdElector(endpoints, "a", PARTITIONS, ttl=TTL, prefix=etcd_prefix)
    led = wait_until(elector.step, timeout=WAIT, what="a to lead through the good members")
    assert sorted(led) == list(range(PARTITIONS))
    elector.close()


# Fair split, joins and leaves


def test_two_then_three_electors_split_evenly_as_members_join_and_leave(
    electors: Electors,
) -> None:
    electors.start("a")
    electors.start("b")
    electors.wait_balanced("a", "b")
    electors.start("c")
    electors.wait_balanced("a", "b", "c")
    assert sorted(len(electors.log.led(h)) for h in "abc") == [5, 5, 6]
    electors.leave("a")
    electors.wait_balanced("b", "c")
    assert electors.loops["b"].elector.members() == ["b", "c"]


def test_a_closed_leader_is_replaced_at_the_next_step(
    etcd_cluster: EtcdCluster, etcd_prefix: str
) -> None:
    a, b = (EtcdElector(etcd_cluster.endpoints, h, PARTITIONS, TTL, etcd_prefix) for h in "ab")
    rounds: list[tuple[dict[int, Leadership], dict[int, Leadership]]] = []

    def split() -> bool:
        rounds.append((a.step(), b.step()))
        return [len(led) for led in rounds[-1]] == [PARTITIONS // 2] * 2

    wait_until(split, timeout=WAIT, what="a and b to split the partitions")
    before = rounds[-1][0]
    a.close()
    after = b.step()
    assert sorted(after) == list(range(PARTITIONS))
    assert all(after[p].epoch > lead.epoch for p, lead in before.items())
    b.close()


# Dead and paused leaders


def test_a_sigkilled_leader_is_replaced_within_ttl_and_a_second(electors: Electors) -> None:
    child = electors.spawn("child")
    electors.wait_leads("child", PARTITIONS, timeout=CHILD_START)
    electors.start("survivor")
    electors.wait_balanced("child", "survivor")
    held = electors.log.led("child")
    killed_at = child.kill()
    led_all_at = electors.wait_leads("survivor", PARTITIONS, timeout=TTL + 1)
    taken = electors.log.led("survivor")
    assert all(taken[p] > epoch for p, epoch in held.items()), (held, taken)
    assert led_all_at - killed_at <= TTL + 1


def test_a_leader_paused_past_its_ttl_leads_nothing_when_it_resumes(electors: Electors) -> None:
    child = electors.spawn("child")
    electors.wait_leads("child", PARTITIONS, timeout=CHILD_START)
    electors.start("survivor")
    electors.wait_balanced("child", "survivor")
    held = electors.log.led("child")
    child.stop()
    electors.wait_leads("survivor", PARTITIONS)  # after the child's lease expired
    resumed_at = child.cont()
    electors.log.wait_for(
        lambda: any(s.returned > resumed_at for s in electors.log.of("child")),
        WAIT,
        "the resumed child to step",
    )
    after = [s for s in electors.log.of("child") if s.returned > resumed_at]
    assert after[0].led == {}, "the first step after the pause still claimed partitions"
    electors.wait_balanced("child", "survivor")  # it campaigns again, under new epochs
    again = electors.log.led("child")
    assert min(again.values()) > max(held.values())


# Losing etcd members


def _steps_since(electors: Electors, holder: str, since: float) -> int:
    return sum(1 for s in electors.log.of(holder) if s.started > since)


def _unchanged_for(electors: Electors, steps: int, since: float) -> None:
    """Every step of a and b since `since`, and at least `steps` of each, led what they led."""
    electors.log.wait_for(
        lambda: min(_steps_since(electors, h, since) for h in "ab") >= steps,
        WAIT,
        f"{steps} steps of a and b",
    )
    for holder in "ab":
        mine = electors.log.of(holder)
        before = [s for s in mine if s.returned < since][-1].led
        for step in (s for s in mine if s.started > since):
            assert {p: e for p, (e, _) in step.led.items()} == {
                p: e for p, (e, _) in before.items()
            }


def _through_follower(electors: Electors) -> int:
    """Start a and b talking first to a member that is not the raft leader; that member."""
    follower = electors.cluster.follower_index()
    endpoints = electors.cluster.endpoints
    ordered = endpoints[follower:] + endpoints[:follower]
    electors.start("a", ordered)
    electors.start("b", ordered)
    electors.wait_balanced("a", "b")
    return follower


def test_one_etcd_member_killed_changes_nothing(electors: Electors) -> None:
    follower = _through_follower(electors)
    killed_at = time.monotonic()
    electors.cluster.kill(follower)
    _unchanged_for(electors, steps=10, since=killed_at)


def test_a_hung_etcd_member_is_skipped(electors: Electors) -> None:
    follower = _through_follower(electors)
    stopped_at = time.monotonic()
    electors.cluster.stop(follower)
    _unchanged_for(electors, steps=10, since=stopped_at)


def test_without_quorum_nobody_leads_until_it_returns(electors: Electors) -> None:
    electors.start("a")
    electors.start("b")
    electors.wait_balanced("a", "b")
    doomed = [electors.cluster.leader_index(), electors.cluster.follower_index()]
    lost_at = time.monotonic()
    for i in doomed:
        electors.cluster.kill(i)
    electors.log.wait_for(
        lambda: all(electors.log.led(h) == {} for h in "ab"), WAIT, "a and b to step down"
    )
    down_at = time.monotonic()
    electors.log.wait_for(
        lambda: min(_steps_since(electors, h, down_at) for h in "ab") >= 2, WAIT, "2 more steps"
    )
    for i in doomed:
        electors.cluster.restart(i, wait_healthy=False)
    back_at = time.monotonic()
    electors.cluster.wait_healthy()
    electors.wait_balanced("a", "b")
    for holder in "ab":
        # No step outlasted its trust window, and once down nobody claimed anything until
        # quorum was back.
        outage = [s for s in electors.log.of(holder) if lost_at < s.started < back_at]
        assert all(s.returned - s.started <= TTL / 2 + STEP_SLACK for s in outage)
        first_down = next(i for i, s in enumerate(outage) if not s.led)
        assert all(not s.led for s in outage[first_down:])
