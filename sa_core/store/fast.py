"""Prepared Core statements executed straight on the DBAPI cursor (the hot path).

SQLAlchemy spends tens of microseconds per ``Connection.execute`` (cache lookup, parameter
processing, result set-up), more than SQLite spends running the statement. A
:class:`Prepared` statement is compiled once per dialect by SQLAlchemy itself, and each call
then only converts its parameters with the column types' own bind/result processors and runs
the SQL on the connection's DBAPI cursor. Statements the plan cannot handle (named
paramstyles, expanding ``IN``) fall back to ``Connection.execute``.

On asyncpg (PostgreSQL) a statement inside a started transaction, or on an autocommit
connection, goes straight to the driver connection (``driver_connection.fetch`` with asyncpg's
own statement cache) from the greenlet of the operation's ``run_sync``, skipping the DBAPI
adapter's cursor (its lock, its statement cache, its status parsing): about a third of the
client CPU of a statement. The store sends ``BEGIN`` and ``COMMIT`` itself; driver errors are
translated as the adapter would, so callers see the usual ``sqlalchemy.exc`` errors. A
single-query read outside a transaction runs from async code (:meth:`Prepared.rows_async`), with
no greenlet at all.

:class:`Deferred` writes are the other half of the PostgreSQL path: a transaction keeps them
and :func:`run_batch_async` sends them together, as one statement of ``WITH`` parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from sqlalchemy import ColumnElement
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError, InvalidRequestError
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.util.concurrency import await_

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

Processor = Callable[[Any], Any]


@dataclass(slots=True)
class _Plan:
    sql: str
    defaults: list[Any]
    """Positional values: literals of the statement, caller slots overwritten per call."""
    slots: list[tuple[int, str]]
    """(position, bindparam name) of each value the caller passes."""
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    """The caller's values of :attr:`slots`, in their order, taken in one call."""
    dense: bool
    """Whether the slots are every position in order (the picked values are all the values)."""
    binders: list[tuple[int, Processor, bool]]
    """(position, bind processor, whether it keeps ``None``) of the values the column type
    converts (JSON, ...); a processor that maps ``None`` to ``None`` is skipped for ``None``."""
    keys: list[str]
    converted: list[tuple[int, Processor, bool]]
    """(position, result processor, whether it keeps ``None``) of the columns read converted."""
    on_asyncpg: bool
    """Whether the dialect drives asyncpg (the statement may go straight to it: :func:`_direct`)."""


class Prepared:
    """A Core statement compiled once per dialect and run on the DBAPI cursor.

    Args:
        stmt: The statement; caller values are ``bindparam(name)`` placeholders.
        columns: The columns the statement returns (SELECT list or RETURNING), in order.

    """

    __slots__ = ("stmt", "columns", "_plans", "_last")

    def __init__(self, stmt: Executable, columns: Sequence[ColumnElement[Any]] = ()) -> None:
        self.stmt = stmt
        self.columns = list(columns)
        self._plans: dict[tuple[Any, ...], _Plan | None] = {}
        self._last: tuple[Dialect, _Plan | None] | None = None

    def plan(self, dialect: Dialect) -> _Plan | None:
        """How the statement runs on ``dialect`` straight on the driver, or ``None`` (it cannot)."""
        last = self._last
        if last is not None and last[0] is dialect:
            return last[1]
        plan = self._plan_for(dialect)
        self._last = (dialect, plan)
        return plan

    def _plan_for(self, dialect: Dialect) -> _Plan | None:
        # Plans are shared by every engine of the same dialect kind (not kept per instance, so
        # opening many stores does not grow the cache).
        key = (type(dialect), dialect.paramstyle, dialect.server_version_info)
        try:
            return self._plans[key]
        except KeyError:
            pass
        stmt: Any = self.stmt
        compiled: Any = stmt.compile(dialect=dialect)
        plan = None
        if compiled.positional and "POSTCOMPILE" not in compiled.string:
            binds: Mapping[str, BindParameter[Any]] = compiled.binds
            names = list(compiled.positiontup)
            converted: list[tuple[int, Processor, bool]] = []
            for index, column in enumerate(self.columns):
                processor = _result_processor(column, dialect)
                if processor is not None:
                    converted.append((index, processor, _keeps_none(processor)))
            binders: list[tuple[int, Processor, bool]] = []
            for index, name in enumerate(names):
                binder: Any = binds[name].type.dialect_impl(dialect).bind_processor(dialect)
                if binder is not None:
                    binders.append((index, binder, _keeps_none(binder)))
            slots = [(i, name) for i, name in enumerate(names) if binds[name].required]
            plan = _Plan(
                sql=compiled.string,
                defaults=[binds[name].value for name in names],
                slots=slots,
                pick=_picker([name for _, name in slots]),
                dense=[i for i, _ in slots] == list(range(len(names))),
                binders=binders,
                keys=[getattr(column, "key", None) or column.name for column in self.columns],
                converted=converted,
                on_asyncpg=dialect.driver == "asyncpg",
            )
        self._plans[key] = plan
        return plan

    @staticmethod
    def _args(plan: _Plan, params: Mapping[str, Any]) -> tuple[Any, ...]:
        try:
            picked = plan.pick(params)
        except KeyError as missing:
            raise KeyError(f"Missing value for bound parameter {missing}") from None
        binders = plan.binders
        if plan.dense:
            if not binders:
                return picked
            values = list(picked)
        else:
            values = plan.defaults.copy()
            for (index, _), value in zip(plan.slots, picked, strict=True):
                values[index] = value
        for index, binder, keeps_none in binders:
            value = values[index]
            if value is not None or not keeps_none:
                values[index] = binder(value)
        return tuple(values)

    def run(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Execute without fetching rows; returns the affected row count.

        The hot path of every write: :meth:`plan`'s and :func:`_cursor`'s common cases are
        inlined (two Python calls fewer per statement).
        """
        dialect = conn.dialect
        last = self._last
        plan = last[1] if last is not None and last[0] is dialect else self.plan(dialect)
        if plan is None:
            return int(conn.execute(self.stmt, dict(params)).rowcount)
        driver = _direct(conn) if plan.on_asyncpg else None
        if driver is not None:
            args = self._args(plan, params)
            status = _await(conn, plan.sql, args, driver.execute(plan.sql, *args))
            count = status.rpartition(" ")[2]
            return int(count) if count.isdigit() else -1
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        args = self._args(plan, params)
        try:
            cursor.execute(plan.sql, args)
            return int(cursor.rowcount)
        except Exception as error:
            _reraise(conn.dialect, plan.sql, args, error)
        finally:
            cursor.close()

    def run_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Execute once per parameter set (``executemany``)."""
        plan = self.plan(conn.dialect)
        if plan is None:
            conn.execute(self.stmt, [dict(row) for row in rows])
            return
        cursor = _cursor(conn)
        args = [self._args(plan, row) for row in rows]
        try:
            cursor.executemany(plan.sql, args)
        except Exception as error:
            _reraise(conn.dialect, plan.sql, args, error)
        finally:
            cursor.close()

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Execute and return every row as a dict keyed by column name."""
        dialect = conn.dialect
        last = self._last
        plan = last[1] if last is not None and last[0] is dialect else self.plan(dialect)
        if plan is None:
            result = conn.execute(self.stmt, dict(params))
            return [dict(row) for row in result.mappings()]
        args = self._args(plan, params)
        driver = _direct(conn) if plan.on_asyncpg else None
        if driver is not None:
            raw = _await(conn, plan.sql, args, driver.fetch(plan.sql, *args))
        else:
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute(plan.sql, args)
                raw = cursor.fetchall()
            except Exception as error:
                _reraise(conn.dialect, plan.sql, args, error)
            finally:
                cursor.close()
        return _converted(plan, raw)

    async def rows_async(
        self, conn: AsyncConnection, params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """:meth:`rows` from async code, straight on the asyncpg connection (no greenlet).

        For a PostgreSQL connection in autocommit (a read outside a transaction).
        """
        sync = conn.sync_connection
        assert sync is not None
        plan = self.plan(sync.dialect)
        if plan is None:
            return await conn.run_sync(lambda c: self.rows(c, params))
        args = self._args(plan, params)
        driver: Any = sync.connection.driver_connection
        try:
            raw = await driver.fetch(plan.sql, *args)
        except Exception as error:
            _raise_translated(sync, plan.sql, args, error)
        return _converted(plan, raw)

    def first(self, conn: Connection, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """Execute and return the first row, or ``None``."""
        found = self.rows(conn, params)
        return found[0] if found else None


def _converted(plan: _Plan, raw: Sequence[Any]) -> list[dict[str, Any]]:
    """Driver rows as dicts keyed by column, values through the columns' result processors.

    ``None`` skips a processor that maps it to ``None`` (most JSON columns of most rows are
    ``NULL``).
    """
    keys, converted = plan.keys, plan.converted
    out = []
    for row in raw:
        values = list(row)
        for index, processor, keeps_none in converted:
            value = values[index]
            if value is not None or not keeps_none:
                values[index] = processor(value)
        out.append(dict(zip(keys, values, strict=True)))
    return out


def _keeps_none(binder: Processor) -> bool:
    """Whether a bind processor turns ``None`` into ``None`` (so ``None`` can skip it)."""
    try:
        return binder(None) is None
    except Exception:
        return False


def _direct(conn: Connection) -> Any:
    """The asyncpg connection to run a statement on directly, or ``None`` (use the cursor).

    For a connection of the asyncpg dialect (a plan's ``on_asyncpg``), and only where the
    adapter would not start a transaction first: on an autocommit connection, or once the
    transaction has begun.
    """
    proxied: Any = conn.connection
    adapter = proxied.dbapi_connection
    if getattr(adapter, "_handle_exception", None) is None:  # not the adapter we know
        return None
    driver = proxied.driver_connection
    if driver.is_in_transaction() or adapter.autocommit:
        return driver
    return None


def _await(conn: Connection, sql: str, args: Any, awaitable: Any) -> Any:
    """Await a driver call from the operation's greenlet; errors as ``sqlalchemy.exc`` ones."""
    try:
        return await_(awaitable)
    except Exception as error:
        _raise_translated(conn, sql, args, error)


def _raise_translated(conn: Connection, sql: str, args: Any, error: Exception) -> NoReturn:
    """Raise an asyncpg error as ``Connection.execute`` would (the adapter's translation)."""
    try:
        adapter: Any = conn.connection.dbapi_connection
        adapter._handle_exception(error)  # raises the DBAPI-level error
        raise error
    except Exception as translated:
        _reraise(conn.dialect, sql, args, translated)


def run_on_driver(conn: Connection, sql: str) -> None:
    """Run a statement without parameters (``BEGIN``, ``COMMIT``) on the asyncpg connection.

    Call from the operation's greenlet; errors come as ``sqlalchemy.exc`` ones.
    """
    driver: Any = conn.connection.driver_connection
    _await(conn, sql, (), driver.execute(sql))


async def run_on_driver_async(conn: AsyncConnection, sql: str) -> None:
    """:func:`run_on_driver` from async code (no greenlet)."""
    sync = conn.sync_connection
    assert sync is not None
    driver: Any = sync.connection.driver_connection
    try:
        await driver.execute(sql)
    except Exception as error:
        _raise_translated(sync, sql, (), error)


def in_driver_transaction(conn: Connection) -> bool:
    """Whether the asyncpg connection under ``conn`` has a transaction open."""
    driver: Any = conn.connection.driver_connection
    return bool(driver.is_in_transaction())


def _picker(names: list[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """A function taking the values of ``names`` from a mapping, as a tuple, in one C call."""
    if len(names) > 1:
        return itemgetter(*names)
    if names:
        name = names[0]
        return lambda params: (params[name],)
    return lambda params: ()


def _cursor(conn: Connection) -> Any:
    return conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]


def _reraise(dialect: Dialect, sql: str, args: Any, error: Exception) -> NoReturn:
    """Re-raise a driver error wrapped the way ``Connection.execute`` does (``sqlalchemy.exc``)."""
    base = dialect.loaded_dbapi.Error
    if isinstance(error, base):
        raise DBAPIError.instance(sql, args, error, base, dialect=dialect) from error
    raise error


class Deferred(NamedTuple):
    """A write whose caller does not wait for its result: sent later, batched with others.

    On PostgreSQL a transaction's deferred writes go to the server together, as one statement
    (each a data-modifying ``WITH`` part), when the transaction next reads or commits: one round
    trip instead of one per write, and none for ``BEGIN`` and ``COMMIT`` when nothing else was
    sent. Elsewhere they run at once, as the operation they stand for.

    Args:
        prepared: An ``INSERT``, ``UPDATE`` or ``DELETE`` (or a ``SELECT`` used as a guard).
        params: Its parameters.
        on_miss: When the statement must change (or return) a row: what to run instead, in
            the transaction, when it did not. ``None``: any row count will do.
        fencing: The statement is also the transaction's lease fence (see
            :meth:`~sa_core.store.storebase.StoreBase.fenced`); when it misses, the fence runs
            before the commit as usual.

    Immutable, as a named tuple: built on every write of the hot path, at about half the cost of
    a frozen dataclass (whose ``__init__`` sets each field through ``object.__setattr__``).
    """

    prepared: Prepared
    params: Mapping[str, Any]
    on_miss: Callable[[Connection], Any] | None = None
    fencing: bool = False


_BATCH_SQL: dict[tuple[Any, ...], str] = {}
_PLACEHOLDER = re.compile(r"\$(\d+)")


def _batch_sql(
    plans: Sequence[_Plan],
    guarded: Sequence[bool],
    read: _Plan | None = None,
) -> str:
    """One statement running every plan as a ``WITH`` part; it returns each part's row count.

    A guarded part that changes no row makes the statement fail (``1 / 0``), so nothing of it
    is applied: the caller then runs the parts one by one, with their fallbacks. With ``read``,
    each row of that query follows the counts (in its order; one row of ``NULL`` and a ``NULL``
    last column when it has none). Like every part, it sees the database as the statement
    began, without the parts' own writes: read no table the parts write.
    """
    key = (tuple(id(plan) for plan in plans), tuple(guarded), id(read))
    sql = _BATCH_SQL.get(key)
    if sql is not None:
        return sql
    parts, columns, offset = [], [], 0

    def shifted(plan: _Plan) -> str:
        def renumber(match: re.Match[str], shift: int = offset) -> str:
            return f"${int(match.group(1)) + shift}"

        return _PLACEHOLDER.sub(renumber, plan.sql)

    for index, plan in enumerate(plans):
        body = shifted(plan)
        offset += len(plan.defaults)
        returns = body.lstrip().upper().startswith("SELECT") or " RETURNING " in body
        parts.append(f"s{index} AS ({body}{'' if returns else ' RETURNING 1'})")
        count = f"(SELECT count(*) FROM s{index})"
        columns.append(f"1 / {count}" if guarded[index] else count)
    if read is None:
        sql = f"WITH {', '.join(parts)} SELECT {', '.join(columns)}"
    else:
        parts.append(f"r AS (SELECT x.*, row_number() OVER () AS sa_n FROM ({shifted(read)}) x)")
        sql = (
            f"WITH {', '.join(parts)} SELECT {', '.join(columns)}, r.* "
            "FROM (SELECT 1) AS one LEFT JOIN r ON true ORDER BY r.sa_n"
        )
    if len(_BATCH_SQL) < 1024:
        _BATCH_SQL[key] = sql
    return sql


class GuardFailed(Exception):
    """A guarded write of a batch changed no row: nothing of the batch was applied."""


async def run_batch_async(
    conn: AsyncConnection,
    items: Sequence[Deferred],
    *,
    guarded: bool,
    read: Prepared | None = None,
    read_params: Mapping[str, Any] | None = None,
) -> tuple[list[int], list[dict[str, Any]]]:
    """Send deferred writes (and a read) on the asyncpg connection under ``conn``, as one statement.

    Args:
        conn: A PostgreSQL connection (autocommit as far as SQLAlchemy knows).
        items: The writes, in order.
        guarded: Make it all or nothing: a write with an ``on_miss`` that changes no row undoes
            the whole statement (for a batch sent outside a transaction).
        read: A query whose rows come back with the counts; it sees the database as the
            statement began, so it must read nothing the writes change. It needs a prepared
            plan on this dialect.
        read_params: Its parameters.

    Returns:
        Each write's row count, and the read's rows (none without ``read``).

    Raises:
        GuardFailed: ``guarded`` and a write with an ``on_miss`` changed no row.
    """
    sync = conn.sync_connection
    assert sync is not None
    dialect = sync.dialect
    driver: Any = sync.connection.driver_connection
    plans: list[_Plan] = []
    args: list[Any] = []
    for item in items:
        plan = item.prepared.plan(dialect)
        assert plan is not None, "only statements with a prepared plan are deferred"
        plans.append(plan)
        args.extend(Prepared._args(plan, item.params))
    read_plan = read.plan(dialect) if read is not None else None
    if read is not None:
        assert read_plan is not None, "only queries with a prepared plan go with a batch"
        args.extend(Prepared._args(read_plan, read_params or {}))
    if len(items) == 1 and read_plan is None:  # one statement: nothing to undo if it misses
        try:
            status = await driver.execute(plans[0].sql, *args)
        except Exception as error:
            _raise_translated(sync, plans[0].sql, args, error)
        tail = status.rpartition(" ")[2]
        count = int(tail) if tail.isdigit() else 0
        if guarded and count == 0 and items[0].on_miss is not None:
            raise GuardFailed
        return [count], []
    marks = [guarded and item.on_miss is not None for item in items]
    sql = _batch_sql(plans, marks, read_plan)
    try:
        records = await driver.fetch(sql, *args)
    except Exception as error:
        if type(error).__name__ == "DivisionByZeroError" and any(marks):
            raise GuardFailed from None
        _raise_translated(sync, sql, args, error)
    first = len(items)
    counts = [int(value or 0) for value in list(records[0])[:first]]
    if read_plan is None:
        return counts, []
    found = [list(record)[first:-1] for record in records if record[-1] is not None]
    return counts, _converted(read_plan, found)


def _result_processor(column: ColumnElement[Any], dialect: Dialect) -> Any:
    """The column type's result processor, without the column's type code.

    asyncpg's numeric types (``Float``, ``Numeric``) choose their processor by the type code
    of the result column and raise without one; asyncpg gives their values as Python numbers
    already, so they need none.
    """
    try:
        return column.type.dialect_impl(dialect).result_processor(dialect, None)
    except (TypeError, InvalidRequestError):
        return None
