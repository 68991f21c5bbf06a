"""``qloop eval``: run suites of task notebooks against the agent and report how well it did.

- ``suite.py``: tasks (notebooks with tagged setup, check and solution cells) and suites.
- ``harness.py``: one trial in a fresh kernel through ``qloop run``'s client; judging it.
- ``run.py``: every task × trial, in parallel, within a budget, resumable.
- ``report.py``, ``stats.py``, ``compare.py``: the reports, the statistics, comparing two runs.
- ``solvers.py``: scripted solvers the Messages API stand-in plays (testing a suite offline).
- ``suites/starter/``: the starter suite shipped with the package.
"""
