"""Sign-in attempts per client: a sliding minute per address, and a bound on how many
addresses are remembered (time is a clock the test moves)."""

from __future__ import annotations

from chatgate.platforms.webchat.attempts import SignInAttempts


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_waits_once_over_its_budget_until_its_oldest_attempt_is_a_minute_old() -> None:
    clock = Clock()
    attempts = SignInAttempts(3, clock=clock)
    for step in range(3):
        clock.now += step
        assert attempts.admit("10.0.0.1") is None
    assert attempts.admit("10.0.0.1") == 60.0 - 3  # the first was 3 s ago
    assert attempts.admit("10.0.0.2") is None, "another address has its own budget"
    clock.now = 1000.0 + 60.0
    assert attempts.admit("10.0.0.1") is None
    assert attempts.admit("10.0.0.1") is not None


def test_at_most_max_clients_addresses_are_remembered_least_recent_first_forgotten() -> None:
    clock = Clock()
    attempts = SignInAttempts(1, max_clients=100, clock=clock)
    for i in range(1000):
        attempts.admit(f"10.0.{i // 256}.{i % 256}")
    assert len(attempts) == 100
    assert attempts.admit("10.0.3.231") is not None, "the most recent address is still limited"
    assert attempts.admit("10.0.0.0") is None, "the oldest was forgotten"
