"""What a step starts on Spark stops with it, and looking at Spark data runs no job.

A local Spark session (``local[2]``, loopback only) runs in a real kernel. Each agent step's jobs
carry a job group of its own; a step stopped by ``--timeout`` while a Spark action waits has that
group cancelled, the jobs its interrupted action submits later included.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import saved_record
from tests.kernel_client import LabKernel

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.kernel, pytest.mark.spark]

SESSION = """
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").appName("qloop-clusters-test")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").getOrCreate())
sc = spark.sparkContext
sc.setJobGroup("mine", "the user's own group")
from pyspark.sql.functions import udf
spark.range(0, 2, 1, 2).select(udf(lambda x: x, "int")("id")).collect()  # Python workers warm
print(sc.getLocalProperty("spark.jobGroup.id"))
"""
SLOW_ACTION = """
from pyspark.sql.functions import udf
@udf("int")
def slow(x):
    import time
    open({marker!r}, "a").write("started\\n")
    time.sleep(120)
    return x
spark.range(0, 4, 1, 2).select(slow("id")).collect()  # one job, no shuffle
"""
JOBS = """
tracker = sc.statusTracker()
group = {group!r}
print(len(tracker.getJobIdsForGroup(group)), list(tracker.getActiveJobsIds()),
      sorted({{tracker.getJobInfo(j).status for j in tracker.getJobIdsForGroup(group)}}))
"""


@pytest.fixture(scope="module")
def api() -> Iterator[StandInAPI]:
    with StandInAPI() as server:
        yield server


# The Python workers run the kernel's Python (pyarrow and all), not the first on PATH.
SPARK_ENV = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
STARTS_SPARK = SESSION.split("sc.setJobGroup")[0] + SLOW_ACTION


def test_stop_cancels_the_jobs_of_a_context_the_step_started(
    api: StandInAPI, tmp_path: Path
) -> None:
    marker = tmp_path / "udf-started"
    code = STARTS_SPARK.format(marker=str(marker))
    api.reset([Reply([tool_use("run_code", {"code": code})]), Reply([text("unused")])])
    with LabKernel({**api.environment(), **SPARK_ENV}) as bare:
        bare.run("%load_ext qloop_kernel")
        subshell = bare.create_subshell()
        agent = bare.execute("%%agent --new --approve auto\nStart Spark.", cell_id="spark-new")
        stop = bare.wait_for_button("Stop", parent=agent, timeout=60)
        ends = time.monotonic() + 180
        while not marker.exists() and time.monotonic() < ends:  # the job runs its UDF
            time.sleep(0.5)
        assert marker.exists(), bare.text(agent)
        bare.click(stop, subshell_id=subshell)
        assert bare.complete(agent, 60)["content"]["status"] == "ok"
        result = json.dumps(saved_record(bare, agent), ensure_ascii=False)
        assert "the Spark jobs of the SparkContext the step started cancelled" in result, result
        active = "print(list(spark.sparkContext.statusTracker().getActiveJobsIds()))"
        ends = time.monotonic() + 15
        while (jobs := bare.run(active).strip()) != "[]" and time.monotonic() < ends:
            time.sleep(0.5)
        assert jobs == "[]"  # the UDF sleeps 120 s: a job left running would still be active


@pytest.fixture(scope="module")
def lab(api: StandInAPI) -> Iterator[LabKernel]:
    with LabKernel({**api.environment(), **SPARK_ENV}) as kernel:
        kernel.run("%load_ext qloop_kernel")
        assert kernel.run(SESSION, timeout=180).strip().splitlines()[-1] == "mine"
        yield kernel


def job_state(lab: LabKernel, group: str) -> tuple[int, str, str]:
    count, active, statuses = lab.run(JOBS.format(group=group)).strip().split(" ", 2)
    return int(count), active, statuses


def test_a_step_runs_in_its_own_job_group_and_the_users_comes_back(
    lab: LabKernel, api: StandInAPI
) -> None:
    code = 'print(sc.getLocalProperty("spark.jobGroup.id"))'
    api.reset([Reply([tool_use("run_code", {"code": code})]), Reply([text("done")])])
    agent = lab.execute("%%agent --new --approve auto\nWhich group?", cell_id="spark-group")
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    assert re.search(r"^qloop-step-[0-9a-f]{12}$", lab.text(agent), re.M), lab.text(agent)
    assert lab.run('print(sc.getLocalProperty("spark.jobGroup.id"))').strip() == "mine"


def test_timeout_cancels_the_steps_spark_job(
    lab: LabKernel, api: StandInAPI, tmp_path: Path
) -> None:
    marker = tmp_path / "udf-started"
    code = SLOW_ACTION.format(marker=str(marker))
    api.reset([Reply([tool_use("run_code", {"code": code})]), Reply([text("unused")])])
    agent = lab.execute("%%agent --new --approve auto --timeout 20\nSlow.", cell_id="spark-stop")
    assert lab.complete(agent, 90)["content"]["status"] == "ok"
    # What the model reads (the step's stderr first: py4j logs the interrupted call).
    result = json.dumps(saved_record(lab, agent), ensure_ascii=False)
    found = re.search(
        r"error: the turn ran past its 20 s time limit \(--timeout\) and the step was "
        r"interrupted; Spark job group '(qloop-step-[0-9a-f]{12})' cancelled \(\d+ running jobs?\)",
        result,
    )
    assert found, result
    group = found.group(1)
    if marker.exists():  # the job ran when the turn timed out: it ends, cancelled
        ends = time.monotonic() + 15
        while (state := job_state(lab, group))[1] != "[]" and time.monotonic() < ends:
            time.sleep(0.5)
        assert state == (1, "[]", "['FAILED']"), state
    else:  # not yet submitted (a slow machine): the interrupted action's job never runs
        time.sleep(20)
        assert not marker.exists() and job_state(lab, group)[1] == "[]"
    # The user's job group is back, and Spark still runs jobs.
    assert lab.run('print(sc.getLocalProperty("spark.jobGroup.id"))').strip() == "mine"
    assert lab.run("print(spark.range(5).count())", timeout=120).strip() == "5"


def test_looking_at_spark_data_runs_no_job(lab: LabKernel) -> None:
    lab.run(
        "sales = spark.createDataFrame([(i, i * 1.5) for i in range(50)], 'id INT, amount DOUBLE')\n"
        "totals = sales.groupBy('id').sum('amount')\n"
        "cached = sales.cache()\n"
        "from qloop_kernel.tools.namespace import inspect_variable, list_variables\n"
        "from qloop_kernel.values.fingerprint import fingerprint\n"
        "from qloop_kernel.notebook.session import undo_log\n"
        "sc.setJobGroup('looking', 'inspection under test')\n"
        "list_variables(globals())\n"
        "for name in ['sales', 'totals', 'cached', 'spark', 'sc']:\n"
        "    inspect_variable(globals(), name)\n"
        "    fingerprint(globals()[name])\n"
        "log = undo_log(get_ipython())\n"
        "log.finish(log.begin('sales = totals; cached = 1'))",
        timeout=120,
    )
    assert job_state(lab, "looking")[0] == 0
    lab.run("totals.count()", timeout=120)  # the count is sensitive: an action runs a job
    assert job_state(lab, "looking")[0] > 0
