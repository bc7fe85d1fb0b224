"""The budget's rules, on connections it only sees as holders: who is pushed out for whom.

The behaviour on real sockets is in ``test_http_budgets.py`` and ``test_http_deadlines.py``;
these pin the choices: past its share, an address's newcomer pushes out its own oldest
settled waiting connection; a full budget is made room in by the address holding the most;
a connection being served or vouched for is never pushed out; with nothing to push out, the
newcomer is refused. Time is a clock the test moves.
"""

from __future__ import annotations

from chatgate.app.http.budget import Budget, ConnectionLimits, networks


class Conn:
    def __init__(self, budget: Budget, address: str, *, waiting: bool = True) -> None:
        self.budget = budget
        self.address = address
        self.trusted = False
        self.is_waiting = waiting
        self.closed = False
        self.peer = (address, 40000 + len(budget.by_peer))

    def waiting(self) -> bool:
        return self.is_waiting

    def push_out(self) -> None:
        self.closed = True
        self.budget.release(self, self.peer)

    def vouch(self) -> None:
        self.budget.vouch(self)

    def linger(self, seconds: float) -> None:
        raise AssertionError("the budget never lingers a connection; the ASGI edge does")


NOW = [0.0]


def budget(
    total: int = 100, strangers: int = 6, per_address: int = 3, proxies: tuple[str, ...] = ()
) -> Budget:
    NOW[0] = 0.0
    limits = ConnectionLimits(
        max_connections=total,
        header_timeout=10,
        max_unauthenticated=strangers,
        max_unauthenticated_per_address=per_address,
        trusted_proxies=networks(proxies),
    )
    return Budget(limits, clock=lambda: NOW[0])


def admit(b: Budget, address: str, **kw: bool) -> Conn | None:
    conn = Conn(b, address, **kw)
    return conn if b.admit(conn, conn.peer) else None


def test_an_address_over_its_share_pushes_out_its_own_oldest_settled_waiting_connection() -> None:
    b = budget(strangers=10)
    other = admit(b, "10.0.0.9")
    mine = [admit(b, "10.0.0.1") for _ in range(3)]
    burst = admit(b, "10.0.0.1")  # within a second of the others: nobody has settled yet
    assert burst is not None and not any(c is not None and c.closed for c in mine)
    NOW[0] = 5.0
    newest = admit(b, "10.0.0.1")
    assert newest is not None and mine[0] is not None and mine[0].closed
    assert other is not None and not other.closed, "another address's connection is left alone"
    assert len(b.by_address["10.0.0.1"]) == 4 and b.pushed_out == 1


def test_a_full_budget_is_made_room_in_by_the_address_holding_the_most() -> None:
    b = budget(strangers=6, per_address=6)
    light = [admit(b, f"10.0.0.{n}") for n in range(2)]
    heavy = [admit(b, "10.0.9.9") for _ in range(4)]
    assert heavy[0] is not None
    heavy[0].is_waiting = False  # its request is being answered: never pushed out
    newcomer = admit(b, "10.0.0.50")
    assert newcomer is not None
    assert [c is not None and c.closed for c in heavy] == [False, True, False, False]
    assert not any(c is not None and c.closed for c in light), "the older, lighter addresses keep theirs"
    assert len(b.unauthenticated) == 6


def test_a_vouched_connection_is_never_pushed_out_and_leaves_the_budget() -> None:
    b = budget(strangers=2, per_address=2)
    user = admit(b, "10.0.0.1")
    assert user is not None
    b.vouch(user)
    strangers = [admit(b, "10.0.0.1") for _ in range(50)]
    assert not user.closed and user.trusted
    assert sum(s is not None and not s.closed for s in strangers) == 2
    assert b.open == 3


def test_with_nothing_waiting_a_newcomer_is_refused_and_with_the_total_cap_reached_too() -> None:
    b = budget(strangers=2, per_address=5)
    busy = [admit(b, "10.0.0.1", waiting=False) for _ in range(2)]
    assert all(c is not None for c in busy)
    assert admit(b, "10.0.0.2") is None and b.refused == 1
    full = budget(total=3, strangers=3, per_address=3)
    users = [admit(full, f"10.0.1.{n}") for n in range(3)]
    for user in users:
        assert user is not None
        full.vouch(user)
    assert admit(full, "10.0.1.9") is None, "the total cap holds: users are never pushed out"


def test_a_trusted_proxy_has_no_per_address_cap_only_the_budget() -> None:
    b = budget(strangers=10, per_address=2, proxies=("10.9.0.0/16",))
    through_proxy = [admit(b, "10.9.0.1") for _ in range(10)]
    assert all(c is not None and not c.closed for c in through_proxy)
    assert admit(b, "10.9.0.1") is not None and through_proxy[0] is not None and through_proxy[0].closed


def test_releasing_twice_or_an_unknown_connection_changes_nothing() -> None:
    b = budget()
    conn = admit(b, "10.0.0.1")
    assert conn is not None and b.open == 1
    assert b.release(conn, conn.peer) and not b.release(conn, conn.peer)
    stranger = Conn(b, "10.0.0.2")
    assert not b.release(stranger, stranger.peer)
    assert b.open == 0 and not b.unauthenticated and not b.by_address and not b.by_peer
