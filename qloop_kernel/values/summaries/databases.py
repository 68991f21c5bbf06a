"""Databases: connections described from their catalog, a table's head read with a LIMIT query.

sqlite3 and DuckDB connections, psycopg (3) connections to PostgreSQL, SQLAlchemy engines and
connections (sqlite, DuckDB and PostgreSQL by their catalogs, other dialects through SQLAlchemy's
inspector) and DuckDB relations. A connection's summary lists its tables and views with their
columns and types and the row estimates the engine keeps (sqlite's ``sqlite_stat1``, PostgreSQL's
``pg_class.reltuples``, DuckDB's ``duckdb_tables().estimated_size``): catalog queries only, no
table is scanned or counted. ``conn.table`` (or ``conn.schema.table``) names one table: its columns
and a head read with ``SELECT * ... LIMIT n`` (a view's rows only when asked: a view may be any
query). Every query is bounded in time (PostgreSQL's ``statement_timeout``, DuckDB's interrupt,
sqlite's progress handler and busy timeout) and runs in a transaction of its own that is rolled
back, a savepoint when the connection is inside one. Connection URLs are shown without passwords.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from qloop_kernel.errors import ToolInputError
from qloop_kernel.redact import redact_text

from .common import (
    HEAD_COLWIDTH,
    Brief,
    Kind,
    Paging,
    cut,
    format_table,
    instance_of,
    pick_columns,
    qualified_name,
)

if TYPE_CHECKING:
    from sqlalchemy import CursorResult

QUERY_TIME_S = 2.0  # the longest one catalog or head query may run
MAX_RELATIONS = 500  # tables and views read from a catalog
MAX_CATALOG_COLUMNS = 20_000  # columns read from a catalog, all tables together
LISTED_RELATIONS = 60  # tables and views described in a connection's summary
LISTING_CHARS = 6_500  # their table: a summary fits inspect_variable's 8,000 characters whole
COLUMNS_CHARS = 160  # one table's columns in a connection's summary
Rows = list[tuple[Any, ...]]
Run = Callable[[str, Sequence[Any]], tuple[list[str], Rows]]

CATALOG_SQL = {
    "sqlite": (
        "SELECT 'main', name, type, NULL FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name LIMIT {limit}",
        "SELECT 'main', m.name, p.name, p.type FROM sqlite_master AS m "
        "JOIN pragma_table_info(m.name) AS p WHERE m.type IN ('table', 'view') "
        "AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY m.name, p.cid LIMIT {limit}",
    ),
    "duckdb": (
        "SELECT schema_name, table_name, 'table', estimated_size FROM duckdb_tables() "
        "WHERE NOT internal AND database_name = current_database() UNION ALL "
        "SELECT schema_name, view_name, 'view', NULL FROM duckdb_views() "
        "WHERE NOT internal AND database_name = current_database() ORDER BY 1, 2 LIMIT {limit}",
        "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE NOT internal AND database_name = current_database() "
        "ORDER BY schema_name, table_name, column_index LIMIT {limit}",
    ),
    "postgresql": (
        "SELECT n.nspname, c.relname, CASE c.relkind WHEN 'v' THEN 'view' "
        "WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table' ELSE 'table' END, "
        "CASE WHEN c.reltuples >= 0 AND c.relkind IN ('r', 'm') THEN c.reltuples::bigint END "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg\\_toast%' ORDER BY 1, 2 LIMIT {limit}",
        "SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod) "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f') "
        "AND NOT c.relispartition AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg\\_toast%' ORDER BY 1, 2, a.attnum LIMIT {limit}",
    ),
}
SQLITE_HAS_STATS = "SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'"
SQLITE_STATS = "SELECT tbl, MAX(CAST(stat AS INTEGER)) FROM sqlite_stat1 GROUP BY tbl"
DUCKDB_PATH = "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
ESTIMATES = {
    "sqlite": "sqlite_stat1",
    "duckdb": "duckdb_tables().estimated_size",
    "postgresql": "pg_class.reltuples",
}


@dataclass
class Relation:
    """A table or view of a catalog."""

    schema: str
    name: str
    kind: str  # table, view, materialized view, foreign table
    rows: int | None = None  # the engine's estimate; None when it keeps none
    columns: list[tuple[str, str]] = field(default_factory=list)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass
class Source:
    """A database to query: its dialect, where it is (no password), and how to run a query."""

    dialect: str
    where: str
    run: Run
    quote: Callable[[str], str]
    placeholder: str = "?"
    inspector: Any = None  # SQLAlchemy's, for dialects whose catalog SQL is not known here


@dataclass(frozen=True)
class DatabaseTable:
    """One table or view of a database variable: ``inspect_variable("conn.sales")``."""

    owner: Any
    label: str
    relation: Relation


class SharedTransaction(Exception):
    """Reading would roll back the user's open transaction on a connection the pool shares."""


class QueryTimeout(Exception):
    """A catalog or head query ran past QUERY_TIME_S and was cut off."""


# ---------------------------------------------------------------------------------------------
# Recognising database objects
# ---------------------------------------------------------------------------------------------


def is_sqlite(obj: object) -> bool:
    """A sqlite3 connection."""
    return instance_of(obj, "sqlite3", "Connection")


def is_duckdb(obj: object) -> bool:
    """A DuckDB connection."""
    return instance_of(obj, "duckdb", "DuckDBPyConnection")


def is_duckdb_relation(obj: object) -> bool:
    """A DuckDB relation (a query, not yet run)."""
    return instance_of(obj, "duckdb", "DuckDBPyRelation")


def is_psycopg(obj: object) -> bool:
    """A psycopg (3) connection."""
    return instance_of(obj, "psycopg", "Connection")


def is_sqlalchemy(obj: object) -> bool:
    """A SQLAlchemy Engine or Connection."""
    return instance_of(obj, "sqlalchemy", "Engine", "Connection")


def is_sqlalchemy_url(obj: object) -> bool:
    """A SQLAlchemy URL (``engine.url``): a tuple that holds the password."""
    return instance_of(obj, "sqlalchemy", "URL")


def is_database(obj: object) -> bool:
    """A connection this module describes from its catalog."""
    return is_sqlite(obj) or is_duckdb(obj) or is_psycopg(obj) or is_sqlalchemy(obj)


# ---------------------------------------------------------------------------------------------
# Sessions: one bounded, rolled-back use of a connection
# ---------------------------------------------------------------------------------------------


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _fetch(cursor: Any) -> tuple[list[str], Rows]:
    names = [str(d[0]) for d in cursor.description or ()]
    return names, [tuple(row) for row in cursor.fetchall()]


def _timed_out(exc: Exception) -> bool:
    text = str(exc).lower()
    return "interrupt" in text or "statement timeout" in text or "canceling statement" in text


def _running(
    execute: Callable[[str, Any], Any], fetch: Callable[[Any], tuple[list[str], Rows]] | None = None
) -> Run:
    """``run`` for a source: a query whose time ran out raises QueryTimeout."""

    def run(text: str, args: Sequence[Any]) -> tuple[list[str], Rows]:
        try:
            result = execute(text, tuple(args) or None)
            return (fetch or _fetch)(result)
        except Exception as exc:
            if _timed_out(exc):
                raise QueryTimeout(
                    f"the query ran past {QUERY_TIME_S:g} s and was cut off"
                ) from exc
            raise

    return run


@contextlib.contextmanager
def _progress_limit(conn: Any) -> Iterator[None]:
    """sqlite: abort a statement past QUERY_TIME_S; wait for a lock no longer than that."""
    if not hasattr(conn, "set_progress_handler"):
        yield
        return
    ends = time.monotonic() + QUERY_TIME_S
    (busy,) = conn.execute("PRAGMA busy_timeout").fetchone()
    conn.execute(f"PRAGMA busy_timeout = {min(int(busy), int(QUERY_TIME_S * 1000))}")
    conn.set_progress_handler(lambda: int(time.monotonic() > ends), 10_000)
    try:
        yield
    finally:
        conn.set_progress_handler(None, 0)
        conn.execute(f"PRAGMA busy_timeout = {int(busy)}")


@contextlib.contextmanager
def _sqlite_session(conn: Any, where: str) -> Iterator[Source]:
    with _progress_limit(conn):
        run = _running(lambda text, args: conn.execute(text, args or ()))
        yield Source("sqlite", where, run, _quote)


@contextlib.contextmanager
def _duckdb_session(conn: Any) -> Iterator[Source]:
    # A cursor is a connection of its own to the same database: the user's pending result and
    # transaction stay as they are.
    cursor = conn.cursor()
    timer = threading.Timer(QUERY_TIME_S, cursor.interrupt)
    timer.start()
    try:
        run = _running(cursor.execute)
        _, paths = run(DUCKDB_PATH, ())
        path = paths[0][0] if paths else None
        where = f"DuckDB {path!r}" if path else "DuckDB (in memory)"
        yield Source("duckdb", where, run, _quote)
    finally:
        timer.cancel()
        cursor.close()


@contextlib.contextmanager
def _psycopg_session(conn: Any, where: str) -> Iterator[Source]:
    from psycopg import sql

    # A transaction of its own (a savepoint inside the user's), always rolled back.
    with conn.transaction(force_rollback=True), conn.cursor() as cursor:
        cursor.execute(f"SET LOCAL statement_timeout = {int(QUERY_TIME_S * 1000)}")
        quote = lambda name: sql.Identifier(name).as_string(conn)  # noqa: E731
        yield Source("postgresql", where, _running(cursor.execute), quote, "%s")


@contextlib.contextmanager
def _sqlalchemy_session(obj: Any) -> Iterator[Source]:
    import sqlalchemy

    engine = obj if instance_of(obj, "sqlalchemy", "Engine") else obj.engine
    where = redact_text(engine.url.render_as_string(hide_password=True))
    dialect = engine.dialect.name
    with contextlib.ExitStack() as stack:
        conn = obj if engine is not obj else stack.enter_context(engine.connect())
        nested = conn.in_transaction()
        if not nested and getattr(conn.connection.dbapi_connection, "in_transaction", False):
            raise SharedTransaction(
                "the engine's connection is shared with one of yours that is inside an open "
                "transaction (a sqlite pool keeps one connection); inspect that connection instead"
            )
        # A transaction of its own (a savepoint inside the user's), always rolled back.
        transaction = conn.begin_nested() if nested else conn.begin()
        stack.callback(transaction.rollback)
        if dialect == "postgresql":
            conn.exec_driver_sql(f"SET LOCAL statement_timeout = {int(QUERY_TIME_S * 1000)}")
        if dialect == "sqlite":
            stack.enter_context(_progress_limit(conn.connection.dbapi_connection))

        pyformat = engine.dialect.paramstyle in ("format", "pyformat")

        def execute(text: str, args: Any) -> CursorResult[Any]:
            result: CursorResult[Any]
            if args:
                result = conn.exec_driver_sql(text, args)
            else:
                # The driver may still read % as a placeholder: %% is a % there (and in LIKE).
                result = conn.exec_driver_sql(text.replace("%", "%%") if pyformat else text)
            return result

        def fetch(result: Any) -> tuple[list[str], Rows]:
            return list(result.keys()), [tuple(row) for row in result.fetchall()]

        style = "%s" if pyformat else "?"
        inspector = None if dialect in CATALOG_SQL else sqlalchemy.inspect(conn)
        quote = engine.dialect.identifier_preparer.quote
        yield Source(dialect, where, _running(execute, fetch), quote, style, inspector)


def session(obj: Any) -> contextlib.AbstractContextManager[Source]:
    """A bounded, rolled-back use of the database behind ``obj``."""
    if is_sqlalchemy(obj):
        return _sqlalchemy_session(obj)
    if is_psycopg(obj):
        return _psycopg_session(obj, redact_text(_pg_where(obj)))
    if is_duckdb(obj):
        return _duckdb_session(obj)
    return _sqlite_session(obj, _sqlite_where(obj))


def _pg_where(conn: Any) -> str:
    info = conn.info  # psycopg leaves the password out of info.dsn
    return f"postgresql database {info.dbname!r} on {info.host}:{info.port} as {info.user!r}"


def _sqlite_where(conn: Any) -> str:
    try:
        rows = conn.execute("PRAGMA database_list").fetchall()
    except Exception:
        return "sqlite"
    path = next((row[2] for row in rows if row[1] == "main"), "")
    return f"sqlite {path!r}" if path else "sqlite (in memory)"


# ---------------------------------------------------------------------------------------------
# The catalog
# ---------------------------------------------------------------------------------------------


def catalog(source: Source) -> list[Relation]:
    """Tables and views with columns and row estimates; catalog queries only."""
    if source.inspector is not None:
        return _inspected(source.inspector)
    relations_sql, columns_sql = CATALOG_SQL[source.dialect]
    _, rows = source.run(relations_sql.format(limit=MAX_RELATIONS + 1), ())
    relations = {
        (str(schema), str(name)): Relation(str(schema), str(name), str(kind), _count(estimate))
        for schema, name, kind, estimate in rows
    }
    _, columns = source.run(columns_sql.format(limit=MAX_CATALOG_COLUMNS), ())
    for schema, name, column, dtype in columns:
        if (found := relations.get((str(schema), str(name)))) is not None:
            found.columns.append((str(column), str(dtype or "")))
    if source.dialect == "sqlite" and source.run(SQLITE_HAS_STATS, ())[1]:
        _, stats = source.run(SQLITE_STATS, ())
        for table, count in stats:
            if (found := relations.get(("main", str(table)))) is not None:
                found.rows = _count(count)
    return list(relations.values())


def _inspected(inspector: Any) -> list[Relation]:
    found: list[Relation] = []
    schema = inspector.default_schema_name or ""
    for kind, names in (
        ("table", inspector.get_table_names()),
        ("view", inspector.get_view_names()),
    ):
        for name in names[: MAX_RELATIONS + 1 - len(found)]:
            columns = [(c["name"], str(c["type"])) for c in inspector.get_columns(name)]
            found.append(Relation(schema, name, kind, None, columns))
    return found


def _count(value: Any) -> int | None:
    return int(value) if value is not None and int(value) >= 0 else None


def find_table(relations: list[Relation], parts: Sequence[str]) -> Relation | None:
    """The relation named ``table`` or ``schema.table``; an unqualified name prefers the
    default schemas (main, public)."""
    if len(parts) == 2:
        return next((r for r in relations if (r.schema, r.name) == tuple(parts)), None)
    matches = [r for r in relations if r.name == parts[0]]
    matches.sort(key=lambda r: r.schema not in ("main", "public"))
    return matches[0] if matches else None


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------


def _rows_text(relation: Relation, dialect: str) -> str:
    if relation.rows is None:
        return "?"
    return f"~{relation.rows:,}" if dialect in ESTIMATES else f"{relation.rows:,}"


def _columns_text(relation: Relation) -> str:
    shown = ", ".join(f"{name} {dtype}".strip() for name, dtype in relation.columns)
    return cut(f"{len(relation.columns)}: {shown}", COLUMNS_CHARS)


def summarize_database(obj: Any, label: str, paging: Paging) -> str:
    """Tables and views of a connection, from its catalog (``offset=`` pages through them)."""
    _no_paging(label, paging)
    try:
        with session(obj) as source:
            relations = catalog(source)
    except Exception as exc:  # a lock held elsewhere, a query cut off, a closed connection
        return f"{label}: {_type_name(obj)}\nCatalog not read ({_why(exc)})."
    if paging.offset and paging.offset >= len(relations):
        raise ToolInputError(
            f"offset {paging.offset:,} is past the last of the {len(relations):,} tables and "
            f"views {label!r} lists (offsets 0-{max(len(relations) - 1, 0):,})"
        )
    return _catalog_text(obj, label, source, relations, paging.offset)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {cut(redact_text(' '.join(str(exc).split())), 300)}"


def _catalog_text(
    obj: Any, label: str, source: Source, relations: list[Relation], offset: int
) -> str:
    estimate = ESTIMATES.get(source.dialect)
    more = len(relations) > MAX_RELATIONS
    found = relations[:MAX_RELATIONS]
    count = f"{MAX_RELATIONS:,}+" if more else f"{len(found):,}"
    lines = [
        f"{label}: {_type_name(obj)}, {source.where}",
        f"{count} tables and views (from the catalog; no table was read or counted)",
        f"Rows: {estimate} estimates (~; ? where the engine keeps none)"
        if estimate
        else "Rows: not counted (the engine keeps no estimate here)",
        "",
    ]
    table, listed = _listing(found[offset : offset + LISTED_RELATIONS], source.dialect)
    lines.append(table if listed else "(no tables)")
    if offset:
        lines.append(f"(listed from {offset:,}: tables and views 0-{offset - 1:,} come before)")
    left = len(found) - offset - listed
    if left or more:
        shown = f"{left:,}+" if more else f"{left:,}"
        lines.append(
            f"... {shown} more not listed: inspect_variable('{label}', offset={offset + listed}) "
            "lists the next ones"
        )
    lines.append(f"\nInspect one with inspect_variable('{label}.TABLE'): columns and first rows.")
    return "\n".join(lines)


def _listing(relations: list[Relation], dialect: str) -> tuple[str, int]:
    """The table of the first of ``relations`` that fit in LISTING_CHARS, and how many it lists."""
    header = ["table", "kind", "rows", "columns"]
    rows = [
        [cut(r.qualified, 50), r.kind, _rows_text(r, dialect), _columns_text(r)] for r in relations
    ]
    # Lines laid out for all rows are at least as wide as for fewer: the count found fits.
    lines = format_table(header, rows).split("\n")
    used, fitting = len(lines[0]), 0
    for line in lines[1:]:
        used += len(line) + 1
        if used > LISTING_CHARS:
            break
        fitting += 1
    return format_table(header, rows[:fitting]), fitting


def _type_name(obj: object) -> str:
    return "duckdb.DuckDBPyConnection" if is_duckdb(obj) else qualified_name(type(obj))


def _no_paging(label: str, paging: Paging) -> None:
    if paging.columns is not None or paging.rows:
        raise ToolInputError(
            f"{label!r} is a database connection: columns= and rows= apply to one of its "
            f"tables, such as inspect_variable('{label}.TABLE', rows=10); offset= pages "
            "through its tables and views"
        )


def brief_database(obj: Any) -> Brief:
    """The database behind a connection (no query: listing variables runs none)."""
    if is_sqlalchemy(obj):
        engine = obj if instance_of(obj, "sqlalchemy", "Engine") else obj.engine
        return Brief("", "", cut(redact_text(engine.url.render_as_string(hide_password=True)), 60))
    if is_psycopg(obj):
        return Brief("", "", cut(redact_text(_pg_where(obj)), 60))
    return Brief("", "", "DuckDB connection" if is_duckdb(obj) else "sqlite connection")


# ---------------------------------------------------------------------------------------------
# One table: columns and a bounded head
# ---------------------------------------------------------------------------------------------


def table_of(obj: object, parts: Sequence[str]) -> DatabaseTable | None:
    """The table ``parts`` (``[table]`` or ``[schema, table]``) of a database variable, or None
    when ``obj`` is not one or has no such table (then the name is an attribute path).

    When the catalog cannot be read (a lock held elsewhere, a closed connection, a server that
    does not answer), a name the object has as an attribute is that attribute, as usual; any
    other raises ToolInputError saying why the table could not be looked up.
    """
    if not is_database(obj) or not 1 <= len(parts) <= 2:
        return None
    try:
        with session(obj) as source:
            relations = catalog(source)
    except Exception as exc:
        if _has_attribute(obj, parts[0]):
            return None
        raise ToolInputError(
            f"{'.'.join(parts)!r} could not be looked up: the catalog of this "
            f"{_type_name(obj)} was not read ({_why(exc)}); try again once the database can be read"
        ) from None
    relation = find_table(relations, parts)
    return None if relation is None else DatabaseTable(obj, ".".join(parts), relation)


def _has_attribute(obj: object, name: str) -> bool:
    """Whether ``obj`` has ``name`` as an attribute, found without running a property."""
    missing = object()
    return inspect.getattr_static(obj, name, missing) is not missing


def is_table(obj: object) -> bool:
    """A table or view named through a database variable."""
    return isinstance(obj, DatabaseTable)


def summarize_table(table: DatabaseTable, label: str, paging: Paging) -> str:
    """Columns and types from the catalog; a head read with a LIMIT query."""
    relation = table.relation
    names = [name for name, _ in relation.columns]
    positions = pick_columns(names, paging.columns)
    with session(table.owner) as source:
        lines = [
            f"{label}: {relation.kind} {relation.qualified} of {source.where}",
            f"Rows: {_rows_text(relation, source.dialect)}"
            + (f" ({ESTIMATES[source.dialect]} estimate; not counted)" if relation.rows else ""),
            "",
            f"Columns ({len(relation.columns):,}):",
            format_table(
                ["column", "type"], [[cut(n, 40), cut(t, 40)] for n, t in relation.columns]
            ),
            "",
            _head(source, relation, [names[p] for p in positions], paging),
        ]
    return "\n".join(lines)


def _head(source: Source, relation: Relation, columns: list[str], paging: Paging) -> str:
    if relation.kind != "table" and not paging.rows_asked:
        return (
            f"Rows: not read; a {relation.kind} may run any query: pass rows=N to read N rows "
            "with a LIMIT query (a read query on the user's database)"
        )
    count = paging.head_rows
    selected = ", ".join(source.quote(c) for c in columns) or "*"
    target = f"{source.quote(relation.schema)}.{source.quote(relation.name)}"
    if source.inspector is not None and not relation.schema:
        target = source.quote(relation.name)
    mark = source.placeholder
    query = f"SELECT {selected} FROM {target} LIMIT {mark} OFFSET {mark}"
    try:
        names, rows = source.run(query, (count, paging.offset))
    except QueryTimeout as exc:
        return f"Rows: not read: {exc} (a lock held elsewhere, or a slow query)"
    if paging.offset and not rows:
        raise ToolInputError(f"offset {paging.offset:,} is past the last row of {relation.name}")
    cells = [[cut(_cell(v), HEAD_COLWIDTH) for v in row] for row in rows]
    table = format_table(names, cells) if cells else "(no rows)"
    first = paging.offset
    return (
        f"Rows {first:,}-{first + len(rows) - 1:,} (a read query on the user's database: "
        f"SELECT ... LIMIT {count} OFFSET {first}):\n{table}"
    )


def _cell(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value):,} bytes>"
    return redact_text(str(value))


def brief_table(table: DatabaseTable) -> Brief:
    """Columns of a table (not listed among variables; for completeness)."""
    return Brief("", "", f"{table.relation.kind}, {len(table.relation.columns)} columns")


# ---------------------------------------------------------------------------------------------
# DuckDB relations: a query, described from its bound columns
# ---------------------------------------------------------------------------------------------


def summarize_duckdb_relation(relation: Any, label: str, paging: Paging) -> str:
    """Columns and types, and the query; rows read only on request (through a LIMIT)."""
    names = [str(c) for c in relation.columns]
    types = [str(t) for t in relation.types]
    positions = pick_columns(names, paging.columns)
    lines = [
        f"{label}: duckdb.DuckDBPyRelation (a query, not yet run), {len(names):,} columns",
        "",
        format_table(["column", "type"], [[cut(names[p], 40), types[p]] for p in positions]),
        "",
        "Query: " + cut(" ".join(str(relation.sql_query()).split()), 1_000),
        "",
    ]
    if not paging.rows_asked:
        lines.append(
            "Rows: not read; pass rows=N to read N rows (runs the query with a LIMIT; a "
            "read query on the user's database)"
        )
        return "\n".join(lines)
    lines.append(_relation_rows(relation, [names[p] for p in positions], paging))
    return "\n".join(lines)


def _relation_rows(relation: Any, columns: list[str], paging: Paging) -> str:
    """``rows=`` rows of a DuckDB relation from ``offset``, read with a LIMIT query that is
    interrupted past QUERY_TIME_S. Never raises: a summary that failed would be described from
    the relation's shape, and that runs the whole query again."""
    # The connection is a private attribute of the relation: the one way to interrupt it.
    conn = getattr(relation, "_con", None)
    timer = threading.Timer(QUERY_TIME_S, conn.interrupt) if conn is not None else None
    try:
        picked = relation.project(", ".join(_quote(c) for c in columns))
        result = picked.limit(paging.rows_asked, paging.offset)
        if timer is not None:
            timer.start()
        rows = result.fetchall()
    except Exception as exc:
        if _timed_out(exc):
            return (
                f"Rows: not read: the query ran past {QUERY_TIME_S:g} s and was cut off (a LIMIT "
                "still waits for what comes before it, such as an aggregate or a sort)"
            )
        return f"Rows: not read ({_why(exc)})"
    finally:
        if timer is not None:
            timer.cancel()
    cells = [[cut(_cell(v), HEAD_COLWIDTH) for v in row] for row in rows]
    return f"Rows from {paging.offset:,} (read with LIMIT {paging.rows_asked}):\n" + (
        format_table(columns, cells) if cells else "(no rows)"
    )


def brief_duckdb_relation(relation: Any) -> Brief:
    """Columns of a DuckDB relation; its rows are not counted."""
    return Brief(f"? x {len(relation.columns):,}", "", "DuckDB query, not run")


def summarize_url(url: Any, label: str, paging: Paging) -> str:
    """A SQLAlchemy URL as its text, without the password (its tuple would show it)."""
    shown = redact_text(url.render_as_string(hide_password=True))
    return f"{label}: sqlalchemy.URL (password hidden)\n{shown}"


def brief_url(url: Any) -> Brief:
    """A SQLAlchemy URL's text, without the password."""
    return Brief("", "", cut(redact_text(url.render_as_string(hide_password=True)), 60))


KINDS = [
    Kind(
        "database table", frozenset({"qloop_kernel"}), is_table, summarize_table, brief_table, True
    ),
    Kind(
        "sqlite3 connection", frozenset({"sqlite3"}), is_sqlite, summarize_database, brief_database
    ),
    Kind(
        "DuckDB connection",
        frozenset({"duckdb", "_duckdb"}),
        is_duckdb,
        summarize_database,
        brief_database,
    ),
    Kind(
        "DuckDB relation",
        frozenset({"duckdb"}),
        is_duckdb_relation,
        summarize_duckdb_relation,
        brief_duckdb_relation,
        True,
        lazy=True,
    ),
    Kind(
        "psycopg connection", frozenset({"psycopg"}), is_psycopg, summarize_database, brief_database
    ),
    Kind(
        "SQLAlchemy", frozenset({"sqlalchemy"}), is_sqlalchemy, summarize_database, brief_database
    ),
    Kind("SQLAlchemy URL", frozenset({"sqlalchemy"}), is_sqlalchemy_url, summarize_url, brief_url),
]
