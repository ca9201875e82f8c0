"""A test code location: the project's definitions, the daily schedules due at ``$STREAMJOIN_TEST_DAILY_AT``.

The project's ``<sink>_daily`` schedules fire at 00:00 UTC; ``test_dagster_automation.py`` needs a tick within
the test, so this location builds them with the project's :func:`assets.partitioned_pipelines.daily_schedule`
at the time (``HH:MM`` UTC) the test chose, and keeps every other definition as it is.
"""

import os

from dagster import Definitions

import dagster_project.definitions as project  # the module: one Definitions object at module scope here
from assets.partitioned_pipelines import daily_schedule

_hour, _minute = map(int, os.environ["STREAMJOIN_TEST_DAILY_AT"].split(":"))
_daily = [s for s in (daily_schedule(p, hour_of_day=_hour, minute_of_hour=_minute) for p in project.SQL_PIPELINES) if s]

defs = Definitions(
    assets=project.defs.assets,
    asset_checks=project.defs.asset_checks,
    jobs=project.defs.jobs,
    schedules=[*(s for s in project.defs.schedules if s.name not in {d.name for d in _daily}), *_daily],
    sensors=project.defs.sensors,
    resources=project.defs.resources,
    executor=project.defs.executor,
)
