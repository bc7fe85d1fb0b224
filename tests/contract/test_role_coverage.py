"""Coverage of the contract suite cannot silently regress.

The store's roles are read from ``chatgate.domain.store_roles.ROLES`` by introspection;
the contract tests name what they demonstrate with ``@covers(Role.method)``. A method
added to a role without a contract test, a method of ``Store`` outside every role, or a
method missing from the closed-store table fails here.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from pathlib import Path
from types import ModuleType

from chatgate.domain.store_roles import ROLES
from chatgate.store.base import Store

HERE = Path(__file__).parent
NOT_IN_OUTAGE_TABLE = {"open", "close"}
"""Opening and closing are how a store becomes closed; every other method must fail loudly then."""


def methods(protocol: type) -> set[str]:
    """The public methods a protocol declares, its own and those of the protocols it extends."""
    return {name for name, _ in inspect.getmembers(protocol, inspect.isfunction) if not name.startswith("_")}


def contract_modules() -> list[ModuleType]:
    """Every contract test module, imported (pytest has usually imported them already)."""
    return [importlib.import_module(path.stem) for path in sorted(HERE.glob("test_*_contract.py"))]


def covered() -> dict[str, list[str]]:
    """Method name -> the contract tests that carry ``@covers`` for it."""
    found: dict[str, list[str]] = {}
    for module in contract_modules():
        for name, test in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("test_"):
                continue
            for mark in getattr(test, "pytestmark", []):
                if mark.name == "covers":
                    for method in mark.args:
                        found.setdefault(method, []).append(f"{module.__name__}::{name}")
    return found


def role_of() -> dict[str, str]:
    owners: dict[str, str] = {}
    for role in ROLES:
        for name in methods(role):
            owners.setdefault(name, role.__name__)
    return owners


def test_every_role_is_a_protocol_of_coroutines_with_typed_signatures() -> None:
    for role in ROLES:
        assert getattr(role, "_is_protocol", False), f"{role.__name__} is not a typing.Protocol"
        assert methods(role), f"{role.__name__} declares no method"
        for name in methods(role):
            fn = getattr(role, name)
            assert inspect.iscoroutinefunction(fn), f"{role.__name__}.{name} must be a coroutine"
            assert "return" in typing.get_type_hints(fn), f"{role.__name__}.{name} has no return type"


def test_store_is_exactly_the_union_of_the_roles_and_no_method_is_in_two_roles() -> None:
    seen: dict[str, str] = {}
    for role in ROLES:
        for name in methods(role):
            assert name not in seen, f"{name} is in both {seen[name]} and {role.__name__}"
            seen[name] = role.__name__
    assert methods(Store) == set(seen), "Store must combine the roles and add nothing of its own"
    assert all(role in Store.__mro__ for role in ROLES)


def test_every_method_of_every_role_has_a_contract_test() -> None:
    found = covered()
    owners = role_of()
    missing = sorted(f"{owners[name]}.{name}" for name in owners if name not in found)
    assert not missing, f"role methods without a @covers contract test: {missing}"
    unknown = sorted(set(found) - set(owners))
    assert not unknown, f"@covers names methods no role has: {unknown}"


def test_every_method_but_open_and_close_is_in_the_closed_store_table() -> None:
    lifecycle = importlib.import_module("test_lifecycle_contract")
    expected = set(role_of()) - NOT_IN_OUTAGE_TABLE
    assert set(lifecycle._CALLS) == expected
