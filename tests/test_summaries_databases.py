"""Databases are described from their catalog; a table's head is one LIMIT query, bounded in time.

sqlite3 (its statements traced), DuckDB (a Python function in a query counts its rows), SQLAlchemy
over sqlite and over PostgreSQL, and psycopg on a PostgreSQL server these tests start.
"""

from __future__ import annotations

import re
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.tools.namespace import UnknownNameError, inspect_variable, list_variables
from qloop_kernel.tools.runtime import ToolInputError
from qloop_kernel.values.summaries import databases
from qloop_kernel.values.summaries.trust import trusting
from tests.postgres_server import PASSWORD, Server, binaries, postgres_server


def sales_sqlite(path: str = ":memory:") -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE sales (id INTEGER PRIMARY KEY, city TEXT, amount REAL)")
    conn.executemany(
        "INSERT INTO sales VALUES (?, ?, ?)", [(i, f"city{i % 3}", i * 1.5) for i in range(300)]
    )
    conn.execute(
        "CREATE VIEW by_city AS SELECT city, SUM(amount) AS total FROM sales GROUP BY city"
    )
    conn.commit()
    return conn


def traced(conn: sqlite3.Connection) -> list[str]:
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    return statements


def reads_of(statements: list[str], table: str) -> list[str]:
    """The statements that read rows of ``table`` (catalog pragmas naming it are not reads)."""
    return [s for s in statements if re.search(rf'FROM\s+("main"\.)?"?{table}\b', s)]


# ---------------------------------------------------------------------------------------------
# sqlite3
# ---------------------------------------------------------------------------------------------


def test_sqlite_connection_is_described_from_the_catalog() -> None:
    conn = sales_sqlite()
    statements = traced(conn)
    text = inspect_variable({"conn": conn}, "conn")
    assert text.startswith("conn: sqlite3.Connection, sqlite (in memory)\n2 tables and views")
    assert "main.by_city  view   ?     2: city TEXT, total" in text
    assert "main.sales    table  ?     3: id INTEGER, city TEXT, amount REAL" in text
    # Only the catalog was read: no statement names a table of the user's.
    assert statements and not reads_of(statements, "sales") + reads_of(statements, "by_city")
    assert reads_of(["SELECT * FROM sales"], "sales")  # the check is sensitive
    conn.execute("ANALYZE")  # sqlite keeps row estimates in sqlite_stat1 from now on
    assert "main.sales    table  ~300" in inspect_variable({"conn": conn}, "conn")


def test_sqlite_table_head_is_one_limit_query() -> None:
    conn = sales_sqlite()
    statements = traced(conn)
    text = inspect_variable({"conn": conn}, "conn.sales")
    assert text.startswith("conn.sales: table main.sales of sqlite (in memory)\nRows: ?")
    assert "id      INTEGER\ncity    TEXT\namount  REAL" in text
    assert "Rows 0-4 (a read query on the user's database: SELECT ... LIMIT 5 OFFSET 0):" in text
    assert "4   city1  6.0" in text
    [read] = reads_of(statements, "sales")
    assert read.startswith('SELECT "id", "city", "amount" FROM "main"."sales" LIMIT 5 OFFSET 0')
    page = inspect_variable(
        {"conn": conn}, "conn.main.sales", columns=["amount"], offset=10, rows=2
    )
    assert "Rows 10-11" in page and "amount\n15.0\n16.5" in page
    with pytest.raises(ToolInputError, match="offset 400 is past the last row"):
        inspect_variable({"conn": conn}, "conn.sales", offset=400)
    with pytest.raises(ToolInputError, match="unknown column"):
        inspect_variable({"conn": conn}, "conn.sales", columns=["price"])


def test_a_view_is_read_only_when_asked() -> None:
    conn = sales_sqlite()
    statements = traced(conn)
    text = inspect_variable({"conn": conn}, "conn.by_city")
    assert "Rows: not read; a view may run any query: pass rows=N" in text
    assert not reads_of(statements, "by_city")
    assert "city0  " in inspect_variable({"conn": conn}, "conn.by_city", rows=3)


def test_names_that_are_not_tables_stay_attributes() -> None:
    conn = sales_sqlite()
    assert "bool" in inspect_variable({"conn": conn}, "conn.in_transaction")
    with pytest.raises(UnknownNameError, match="has no attribute 'prices'"):
        inspect_variable({"conn": conn}, "conn.prices")
    with pytest.raises(ToolInputError, match="apply to one of its tables"):
        inspect_variable({"conn": conn}, "conn", rows=3)


def test_a_locked_sqlite_database_is_waited_for_boundedly(tmp_path: Path) -> None:
    path = str(tmp_path / "shop.db")
    sales_sqlite(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # nobody else can read until it ends
    conn = sqlite3.connect(path, timeout=60)  # the user's own wait: a minute
    started = time.monotonic()
    text = inspect_variable({"conn": conn}, "conn")
    assert text == (
        "conn: sqlite3.Connection\nCatalog not read (OperationalError: database is locked)."
    )
    assert time.monotonic() - started < databases.QUERY_TIME_S + 2
    assert conn.execute("PRAGMA busy_timeout").fetchone() == (60_000,)  # the user's, put back
    holder.execute("ROLLBACK")
    assert "main.sales" in inspect_variable({"conn": conn}, "conn")


def test_a_table_of_a_locked_or_closed_sqlite_database_says_why(tmp_path: Path) -> None:
    path = str(tmp_path / "shop.db")
    sales_sqlite(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    conn = sqlite3.connect(path, timeout=60)
    started = time.monotonic()
    with pytest.raises(ToolInputError) as raised:
        inspect_variable({"conn": conn}, "conn.sales")
    assert str(raised.value) == (
        "'sales' could not be looked up: the catalog of this sqlite3.Connection was not read "
        "(OperationalError: database is locked); try again once the database can be read"
    )
    assert time.monotonic() - started < databases.QUERY_TIME_S + 2
    assert "bool" in inspect_variable({"conn": conn}, "conn.in_transaction")  # as usual
    holder.execute("ROLLBACK")
    assert "Rows 0-4" in inspect_variable({"conn": conn}, "conn.sales")
    conn.close()
    with pytest.raises(ToolInputError, match="ProgrammingError: Cannot operate on a closed"):
        inspect_variable({"conn": conn}, "conn.main.sales")
    assert "NoneType" in inspect_variable({"conn": conn}, "conn.row_factory")


def test_a_catalog_of_hundreds_of_tables_fits_whole_and_pages_with_offset() -> None:
    conn = sqlite3.connect(":memory:")
    columns = ", ".join(f"column_{i} TEXT" for i in range(12))
    for i in range(301):
        conn.execute(f"CREATE TABLE t{i:03d}_monthly_regional_figures ({columns})")
    text = inspect_variable({"conn": conn}, "conn")
    assert len(text) <= 8_000 and "omitted" not in text  # not cut: no marker, no lost lines
    listed = re.findall(r"^main\.t(\d{3})_", text, re.M)
    assert listed == [f"{i:03d}" for i in range(len(listed))] and 20 <= len(listed) < 301
    assert text.startswith("conn: sqlite3.Connection, sqlite (in memory)\n301 tables and views")
    assert text.endswith(
        f"... {301 - len(listed)} more not listed: inspect_variable('conn', "
        f"offset={len(listed)}) lists the next ones\n\n"
        "Inspect one with inspect_variable('conn.TABLE'): columns and first rows."
    )
    last = inspect_variable({"conn": conn}, "conn", offset=290)
    assert re.findall(r"^main\.t(\d{3})_", last, re.M) == [str(i) for i in range(290, 301)]
    assert "(listed from 290: tables and views 0-289 come before)" in last
    assert "more not listed" not in last
    with pytest.raises(ToolInputError, match="offset 301 is past the last of the 301 tables"):
        inspect_variable({"conn": conn}, "conn", offset=301)


def test_listing_runs_no_query() -> None:
    conn = sales_sqlite()
    statements = traced(conn)
    listing = list_variables({"conn": conn})
    assert "conn  sqlite3.Connection" in listing and "sqlite connection" in listing
    assert statements == []


# ---------------------------------------------------------------------------------------------
# DuckDB
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def duck() -> Iterator[Any]:
    duckdb = pytest.importorskip("duckdb")
    conn = duckdb.connect()
    conn.execute("CREATE TABLE trips AS SELECT range AS id, range % 7 AS zone FROM range(5000)")
    conn.execute("CREATE VIEW zones AS SELECT zone, count(*) AS n FROM trips GROUP BY zone")
    yield conn
    conn.close()


def test_duckdb_catalog_head_and_estimates(duck: Any) -> None:
    text = inspect_variable({"db": duck}, "db")
    assert text.startswith("db: duckdb.DuckDBPyConnection, DuckDB (in memory)\n2 tables")
    assert "main.trips  table  ~5,000  2: id BIGINT, zone BIGINT" in text
    assert "main.zones  view   ?       2: zone BIGINT, n BIGINT" in text
    table = inspect_variable({"db": duck}, "db.trips", rows=3)
    assert "Rows: ~5,000 (duckdb_tables().estimated_size estimate; not counted)" in table
    assert "id  zone\n0   0\n1   1\n2   2" in table
    assert "DuckDB connection" in list_variables({"db": duck})


def bump(value: int) -> int:
    """A DuckDB function of the test's: it counts the rows a query reads."""
    BUMPED.append(value)
    return value + 1


BUMPED: list[int] = []


def test_duckdb_relation_is_not_run_until_rows_are_asked(duck: Any) -> None:
    BUMPED.clear()
    duck.create_function("bump", bump, ["BIGINT"], "BIGINT", side_effects=True)
    relation = duck.sql("SELECT bump(id) AS next_id, zone FROM trips")
    namespace = {"relation": relation}
    with trusting([f"{__name__}.bump"]):  # as a library's function: a read may call it
        text = inspect_variable(namespace, "relation")
        assert "duckdb.DuckDBPyRelation (a query, not yet run), 2 columns" in text
        assert "next_id  BIGINT" in text and "Rows: not read" in text
        assert "? x 2" in list_variables(namespace)
        assert BUMPED == []
        rows = inspect_variable(namespace, "relation", rows=2, columns=["next_id"])
    assert "next_id\n1\n2" in rows
    assert BUMPED  # the sensitive check: reading rows runs the query


def test_a_relation_whose_summary_is_stopped_is_not_run_for_its_shape(duck: Any) -> None:
    BUMPED.clear()
    duck.create_function("bump", bump, ["BIGINT"], "BIGINT", side_effects=True)
    relation = duck.sql("SELECT bump(id) AS next_id, zone FROM trips")
    # bump is the notebook's own code here: a read on the kernel's thread stops it (DuckDB may
    # also call it from a thread of its own, which reads do not watch: docs/security.md).
    text = inspect_variable({"relation": relation}, "relation", rows=2, columns=["next_id"])
    assert "Shape:" not in text, "a stopped summary runs no query for the relation's shape"


def test_fingerprints_and_undo_run_no_query(duck: Any) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from qloop_kernel.notebook.session import undo_log
    from qloop_kernel.values.fingerprint import fingerprint

    calls: list[int] = []
    duck.create_function(
        "seen", lambda v: calls.append(v) or v, ["BIGINT"], "BIGINT", side_effects=True
    )
    relation = duck.sql("SELECT id FROM trips WHERE seen(id) >= 0")  # counting it calls seen()
    conn = sales_sqlite()
    statements = traced(conn)
    for value in (relation, duck, conn):
        fingerprint(value)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    try:
        shell.user_ns.update(relation=relation, duck=duck, conn=conn)
        log = undo_log(shell)
        log.finish(log.begin("relation = duck = conn = None"))
    finally:
        InteractiveShell.clear_instance()
    assert calls == [] and not reads_of(statements, "sales")
    assert relation.shape == (5000, 1) and calls  # the check is sensitive: its shape runs it


def test_duckdb_query_is_interrupted(duck: Any) -> None:
    duck.execute("CREATE VIEW endless AS SELECT count(*) FROM range(1000000000000) a")
    started = time.monotonic()
    text = inspect_variable({"db": duck}, "db.endless", rows=1)
    assert "count_star()  BIGINT" in text  # the columns, from the catalog
    assert "Rows: not read: the query ran past 2 s and was cut off" in text
    assert time.monotonic() - started < databases.QUERY_TIME_S + 3


@pytest.mark.timeout(60, method="thread")  # a query nobody interrupts would run for days
def test_rows_of_a_slow_duckdb_relation_are_cut_off_and_not_read_again(duck: Any) -> None:
    relation = duck.sql("SELECT sum(hash(i)) AS total FROM range(1000000000000) t(i)")
    started = time.monotonic()
    text = inspect_variable({"relation": relation}, "relation", rows=1)
    took = time.monotonic() - started
    assert "total   HUGEINT" in text and "Query: SELECT sum(hash(i))" in text
    assert text.endswith(
        "Rows: not read: the query ran past 2 s and was cut off (a LIMIT still waits for what "
        "comes before it, such as an aggregate or a sort)"
    )
    assert "described briefly" not in text  # not the fallback, which runs it again for a shape
    assert took < databases.QUERY_TIME_S + 0.5, took
    assert duck.execute("SELECT 41 + 1").fetchall() == [(42,)]  # the connection goes on


def test_a_closed_duckdb_connection_says_why(duck: Any) -> None:
    duck.close()
    assert "Catalog not read (ConnectionException: " in inspect_variable({"db": duck}, "db")
    with pytest.raises(ToolInputError, match="could not be looked up: the catalog of this duckdb"):
        inspect_variable({"db": duck}, "db.trips")


# ---------------------------------------------------------------------------------------------
# SQLAlchemy over sqlite
# ---------------------------------------------------------------------------------------------


def test_sqlalchemy_engine_and_connection_over_sqlite(tmp_path: Path) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    path = tmp_path / "shop.db"
    sales_sqlite(str(path)).close()
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    text = inspect_variable({"engine": engine}, "engine")
    assert text.startswith(f"engine: sqlalchemy.Engine, sqlite:///{path}\n2 tables and views")
    assert "main.sales    table  ?" in text
    with engine.connect() as conn:
        conn.exec_driver_sql("INSERT INTO sales VALUES (1000, 'new', 1.0)")  # not committed
        head = inspect_variable({"conn": conn}, "conn.sales", rows=2)
        assert "Rows 0-1" in head and "0   city0  0.0" in head
        assert conn.in_transaction()  # the user's transaction is still open, with its row
        assert conn.exec_driver_sql("SELECT count(*) FROM sales").scalar() == 301
    engine.dispose()


def test_an_engine_sharing_the_users_open_transaction_is_not_read() -> None:
    """sqlite's in-memory engines keep one connection: rolling back ours would roll back yours."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = sqlalchemy.create_engine("sqlite://")
    with engine.begin() as setup:
        setup.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    assert "main.t  table" in inspect_variable({"engine": engine}, "engine")
    user = engine.connect()
    user.exec_driver_sql("INSERT INTO t VALUES (1)")  # not committed
    text = inspect_variable({"engine": engine}, "engine")
    assert "Catalog not read (SharedTransaction: the engine's connection is shared" in text
    with pytest.raises(ToolInputError, match=r"not read \(SharedTransaction: the engine's"):
        inspect_variable({"engine": engine}, "engine.t")
    assert "x\n1" in inspect_variable({"user": user}, "user.t")  # through the user's connection
    assert user.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1  # the row is still there
    user.close()
    engine.dispose()


def test_other_dialects_are_read_through_the_inspector(tmp_path: Path) -> None:
    """A dialect without catalog SQL here: tables, views and columns from SQLAlchemy's inspector."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    path = tmp_path / "shop.db"
    sales_sqlite(str(path)).close()
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        source = databases.Source(
            "other",
            "elsewhere",
            lambda sql, args: ([], []),
            str,
            inspector=sqlalchemy.inspect(conn),
        )
        found = {(r.name, r.kind): r.columns for r in databases.catalog(source)}
    assert found == {
        ("sales", "table"): [("id", "INTEGER"), ("city", "TEXT"), ("amount", "REAL")],
        ("by_city", "view"): [("city", "TEXT"), ("total", "NULL")],
    }
    engine.dispose()


# ---------------------------------------------------------------------------------------------
# PostgreSQL: psycopg and SQLAlchemy
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    bin_dir = binaries()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries are not installed (apt-get install postgresql)")
    pytest.importorskip("psycopg")
    with postgres_server(bin_dir) as server:
        import psycopg

        with psycopg.connect(server.conninfo(), autocommit=True) as conn:
            conn.execute("CREATE SCHEMA shop")
            conn.execute("CREATE TABLE shop.orders (id int PRIMARY KEY, note text, paid numeric)")
            conn.execute(
                "INSERT INTO shop.orders SELECT i, 'n' || i, i * 2 FROM generate_series(1, 2000) i"
            )
            conn.execute("CREATE TABLE public.fresh (id int)")  # never analyzed: no estimate
            conn.execute(
                "CREATE VIEW shop.big AS SELECT note, sum(paid) FROM shop.orders GROUP BY note"
            )
            conn.execute("ANALYZE shop.orders")
        yield server


def test_psycopg_connection_from_pg_catalog(postgres: Server) -> None:
    import psycopg

    with psycopg.connect(postgres.conninfo()) as conn:
        text = inspect_variable({"pg": conn}, "pg")
        assert text.startswith(
            "pg: psycopg.Connection, postgresql database 'postgres' on 127.0.0.1"
        )
        assert PASSWORD not in text
        assert "public.fresh  table  ?       1: id integer" in text
        assert "shop.big      view   ?       2: note text, sum numeric" in text
        assert "shop.orders   table  ~2,000  3: id integer, note text, paid numeric" in text
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # rolled back
        head = inspect_variable({"pg": conn}, "pg.orders", rows=2)
        assert "Rows: ~2,000 (pg_class.reltuples estimate; not counted)" in head
        assert "id  note  paid\n1   n1    2\n2   n2    4" in head


def test_psycopg_keeps_the_users_transaction(postgres: Server) -> None:
    import psycopg

    with psycopg.connect(postgres.conninfo()) as conn:
        conn.execute("INSERT INTO public.fresh VALUES (7)")  # the user's open transaction
        assert "public.fresh" in inspect_variable({"pg": conn}, "pg")
        assert "id\n7" in inspect_variable({"pg": conn}, "pg.fresh")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)  # ours was local
        assert conn.execute("SELECT count(*) FROM public.fresh").fetchone() == (1,)
        conn.rollback()


def test_a_blocked_head_query_is_cut_off(postgres: Server) -> None:
    import psycopg

    with (
        psycopg.connect(postgres.conninfo()) as holder,
        psycopg.connect(postgres.conninfo(), autocommit=True) as conn,
    ):
        holder.execute("LOCK TABLE shop.orders IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        text = inspect_variable({"pg": conn}, "pg.shop.orders")
        assert "Rows: not read: the query ran past 2 s and was cut off" in text
        assert time.monotonic() - started < databases.QUERY_TIME_S + 3
        holder.rollback()
        assert "n1" in inspect_variable({"pg": conn}, "pg.shop.orders")


def test_sqlalchemy_over_postgresql_hides_the_password(postgres: Server) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = sqlalchemy.create_engine(postgres.url())
    namespace = {"engine": engine}
    text = inspect_variable(namespace, "engine")
    assert text.startswith(
        "engine: sqlalchemy.Engine, "
        f"postgresql+psycopg://postgres:[REDACTED]@127.0.0.1:{postgres.port}/postgres\n"
    )
    assert "shop.orders   table  ~2,000" in text and PASSWORD not in text
    listing = list_variables(namespace)
    assert "sqlalchemy.Engine" in listing and PASSWORD not in listing
    assert "1   n1    2" in inspect_variable(namespace, "engine.shop.orders")
    engine.dispose()


def test_an_unreachable_engine_says_why_and_its_attributes_resolve() -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip("psycopg")
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine = sqlalchemy.create_engine(Server("127.0.0.1", port, "postgres", PASSWORD).url())
    namespace = {"engine": engine}
    with pytest.raises(ToolInputError) as raised:
        inspect_variable(namespace, "engine.shop.orders")
    said = str(raised.value)
    assert said.startswith("'shop.orders' could not be looked up: the catalog of this "
                           "sqlalchemy.Engine was not read (OperationalError: ")  # fmt: skip
    assert "Connection refused" in said and PASSWORD not in said
    url = inspect_variable(namespace, "engine.url")  # an attribute: read as usual
    assert url == (
        "engine.url: sqlalchemy.URL (password hidden)\n"
        f"postgresql+psycopg://postgres:[REDACTED]@127.0.0.1:{port}/postgres"
    )
    assert "Catalog not read (OperationalError: " in inspect_variable(namespace, "engine")
    assert PASSWORD not in list_variables({"url": engine.url})
    engine.dispose()


def test_catalog_reads_scan_no_table(postgres: Server) -> None:
    """pg_stat_user_tables counts each sequential scan: a summary adds none; a head, one."""
    import psycopg

    def scans(conn: Any) -> int:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables "
            "WHERE relname = 'orders'"
        ).fetchone()
        return int(row[0])

    with psycopg.connect(postgres.conninfo(), autocommit=True) as conn:
        conn.execute("SET stats_fetch_consistency = none")
        before = scans(conn)
        inspect_variable({"pg": conn}, "pg")
        list_variables({"pg": conn})
        time.sleep(0.6)  # statistics are flushed at most every 0.5 s... and at commit
        assert scans(conn) == before
        inspect_variable({"pg": conn}, "pg.orders")
        deadline = time.monotonic() + 5
        while scans(conn) == before and time.monotonic() < deadline:
            threading.Event().wait(0.2)
        assert scans(conn) == before + 1


def test_a_table_of_a_closed_postgresql_connection_says_why_and_its_info_hides_the_password(
    postgres: Server,
) -> None:
    import psycopg

    conn = psycopg.connect(postgres.conninfo())
    info = inspect_variable({"pg": conn}, "pg.info")
    assert PASSWORD not in info
    assert PASSWORD not in list_variables({"pg": conn, "info": conn.info})
    conn.close()
    with pytest.raises(ToolInputError) as raised:
        inspect_variable({"pg": conn}, "pg.shop.orders")
    assert "could not be looked up" in str(raised.value)
    assert "closed" in str(raised.value).lower()
    assert "bool" in inspect_variable({"pg": conn}, "pg.closed")  # an attribute as usual
