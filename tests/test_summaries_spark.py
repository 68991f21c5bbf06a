"""A Spark DataFrame is described from its schema and plan: no job runs unless rows are asked.

One local Spark session (``local[1]``, loopback only) serves the module; jobs are counted by
Spark's status tracker under a job group set around each call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from qloop_kernel.tools.namespace import inspect_variable, list_variables
from qloop_kernel.tools.runtime import ToolInputError

pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[1]")
        .appName("qloop-summaries-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    yield session
    session.stop()


def jobs_during(spark: Any, action: Callable[[], object]) -> int:
    """How many Spark jobs ``action`` started (counted in a job group of its own)."""
    context = spark.sparkContext
    group = f"inspect-{id(action)}"
    context.setJobGroup(group, "inspection under test")
    try:
        action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return len(context.statusTracker().getJobIdsForGroup(group))


def frames(spark: Any) -> dict[str, Any]:
    sales = spark.createDataFrame(
        [(i, f"city{i % 3}", i * 1.5) for i in range(100)], "id INT, city STRING, amount DOUBLE"
    )
    totals = sales.groupBy("city").sum("amount").withColumnRenamed("sum(amount)", "total")
    return {"sales": sales, "totals": totals}


def test_inspection_and_listing_run_no_job(spark: Any) -> None:
    namespace = frames(spark)
    assert jobs_during(spark, lambda: list_variables(namespace)) == 0
    for name in namespace:
        assert jobs_during(spark, lambda name=name: inspect_variable(namespace, name)) == 0
    # The count is sensitive: a count() runs a job.
    assert jobs_during(spark, lambda: namespace["totals"].count()) > 0


def test_schema_plan_and_listing(spark: Any) -> None:
    namespace = frames(spark)
    text = inspect_variable(namespace, "totals")
    assert text.startswith("totals: pyspark.sql.DataFrame (lazy, Spark), 2 columns")
    assert "Not computed: the number of rows (count() runs a Spark job" in text
    assert "Cached: no" in text
    assert "city    string  yes" in text and "total   double  yes" in text
    assert "Plan (explain()):" in text and "HashAggregate" in text
    assert "Rows: not read; pass rows=N" in text
    listing = list_variables(namespace)
    assert "? x 3" in listing and "Spark; id int, city string, amount double" in listing
    picked = inspect_variable(namespace, "sales", columns=["amount"])
    assert "Schema (1 of 3 columns)" in picked
    with pytest.raises(ToolInputError, match="no row positions"):
        inspect_variable(namespace, "sales", offset=3)


def test_rows_on_request_run_one_small_job(spark: Any) -> None:
    namespace = frames(spark)
    text: list[str] = []
    jobs = jobs_during(spark, lambda: text.append(inspect_variable(namespace, "sales", rows=2)))
    assert jobs >= 1
    assert "First 2 rows (read with take(2)):" in text[0]
    assert "0   city0  0.0" in text[0] and "1   city1  1.5" in text[0]
