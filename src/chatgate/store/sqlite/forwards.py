"""``reads`` and ``writes``: a role method that only forwards to one function of a connection,
declared in one line instead of written out (``history = reads(history)``), typed from the
function with ``ParamSpec`` so that mypy checks it against its role's protocol."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from chatgate.store.sqlite.database import SqliteRole

T = TypeVar("T")
P = ParamSpec("P")


class reads(Generic[P, T]):
    """A role method that only runs ``fn(conn, *args)`` on a reader: the forward, written once.

    ``history = reads(history)`` in a role class is the method
    ``async def history(self, session_id, limit)``, typed from ``fn`` (mypy checks it against
    the role's protocol like a method written out).
    """

    def __init__(self, fn: Callable[Concatenate[sqlite3.Connection, P], T]) -> None:
        self._fn = fn
        self.__doc__ = fn.__doc__

    @overload
    def __get__(self, role: None, owner: type[Any]) -> reads[P, T]: ...

    @overload
    def __get__(self, role: SqliteRole, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, role: SqliteRole | None, owner: type[Any]) -> Any:
        if role is None:
            return self
        fn, db = self._fn, role._db

        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return await db.read(lambda c: fn(c, *args, **kwargs))

        return method


class writes(Generic[P, T]):
    """A role method that only queues ``fn(conn, *args)`` to the writer (``Database.write``) and
    returns once it committed: the forward, written once; ``redoable`` as for ``write``."""

    def __init__(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], *, redoable: bool = False
    ) -> None:
        self._fn = fn
        self._redoable = redoable
        self.__doc__ = fn.__doc__

    @overload
    def __get__(self, role: None, owner: type[Any]) -> writes[P, T]: ...

    @overload
    def __get__(self, role: SqliteRole, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, role: SqliteRole | None, owner: type[Any]) -> Any:
        if role is None:
            return self
        fn, db, redoable = self._fn, role._db, self._redoable

        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return await db.write(lambda c: fn(c, *args, **kwargs), redoable=redoable)

        return method
