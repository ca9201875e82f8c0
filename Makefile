# Two commands for a newcomer: `make demo` and `make test`. Each brings a fresh
# machine to a working state by itself (virtual environment, Python packages,
# JVM jars for Spark and for the embedded Kafka broker, from Maven Central, and
# Debian's Chromium for the browser test), once.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOCAL := .local
SETUP_STAMP := $(LOCAL)/setup.stamp
CDS_ARCHIVE := $(LOCAL)/cds/spark-driver.jsa
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup kafka demo lint test test-all dagster-ui clean flink flink-diff test-flink-diff operators operator-specs bench chaos bounds sustained

# A Spark home for `SPARK_MASTER=local-cluster[...]` (docs/deployment.md): its workers start
# executors from pyspark's bin/ and jars/, and keep the executors' logs in its work/ folder, not in the venv.
SPARK_HOME_DIR := $(LOCAL)/spark-home

setup: $(SETUP_STAMP) $(SPARK_HOME_DIR) $(CDS_ARCHIVE)

$(SPARK_HOME_DIR): | $(SETUP_STAMP)
	pyspark="$$($(PY) -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" && \
	    mkdir -p $@ && ln -sfn "$$pyspark/bin" $@/bin && ln -sfn "$$pyspark/jars" $@/jars

# The class-data-sharing archive local Spark drivers start with (streamjoin/cds.py): trained by one real
# `streamjoin run` of a pipeline against a throw-away broker, about a minute; ~220 MB.
$(CDS_ARCHIVE): $(SETUP_STAMP)
	$(PY) -m streamjoin.cds sql/lineitem_with_order.sql >$(LOCAL)/cds-training.log 2>&1 || \
	    { tail -n 40 $(LOCAL)/cds-training.log; exit 1; }

# The jvm engine's operators, built from source (Spark and Scala are `provided`).
OPERATORS_JAR := $(LOCAL)/jars/operators/streamjoin-operators.jar
OPERATORS_SRC := jvm/operators/pom.xml $(shell find jvm/operators/src -type f 2>/dev/null)

operators: $(OPERATORS_JAR)

# The Scala twin of streamjoin/contract.py's operator specs, regenerated after a spec changes.
operator-specs:
	$(VENV)/bin/python -m streamjoin.contract

# Installed as a new file renamed over the old one: a running Spark session keeps reading the jar it opened.
# `package` runs the Scala tests too; next to the jar goes the tools jar, the test-only harness LocalRun that
# the differential tests load (streamjoin.testing.engines).
$(OPERATORS_JAR): $(OPERATORS_SRC)
	mvn --batch-mode --quiet -f jvm/operators/pom.xml package
	mkdir -p $(dir $@) && cp jvm/operators/target/streamjoin-operators-0.1.0-tools.jar $(dir $@)tools.jar.tmp && \
	    mv $(dir $@)tools.jar.tmp $(dir $@)streamjoin-operators-tools.jar
	cp jvm/operators/target/streamjoin-operators-0.1.0.jar $@.tmp && mv $@.tmp $@

$(SETUP_STAMP): pyproject.toml jvm/kafka-broker/pom.xml jvm/spark-packages/pom.xml $(OPERATORS_JAR)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	mvn --batch-mode --quiet -f jvm/kafka-broker/pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(LOCAL))/jars/kafka-broker -DincludeScope=runtime
	mvn --batch-mode --quiet -f jvm/spark-packages/pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(LOCAL))/jars/spark -DincludeScope=runtime
	# Debian's Chromium and its ChromeDriver for the Dagster UI test (no browser is downloaded).
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	    { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }
	touch $@

# The local Kafka broker that the CLI, the Dagster UI, its sensors and the demo share (idempotent;
# `.venv/bin/streamjoin kafka status` / `kafka stop`); its data, state file and log are in .local/kafka.
kafka: setup
	$(VENV)/bin/streamjoin kafka start

demo: setup kafka
	$(PY) -m dagster_project.demo

# The quality gates CI runs before the tests: ruff's rules and formatter over the Python, mypy over the package
# (pyproject.toml), and the Scala sources' format (jvm/operators/.scalafmt.conf; `spotless:apply` formats them).
# The Scala unit tests run in the operators' build (`mvn package`, part of make setup).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	mvn --batch-mode --quiet -f jvm/operators/pom.xml spotless:check

# Two pytest workers (pytest-xdist), a group of tests each at a time: a test file, or the groups the long
# replays and kill trials split into (tests/conftest.py). A Spark test waits on its driver's
# scheduling and commits as much as on the CPU, so two at once use the two cores of the CI machine.
TEST_WORKERS ?= 2

test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder -m "not slow"

# Everything make test runs, and the tests marked slow: the resource bounds, the Dagster daemon's
# schedule and sensor, the python engine's one-row replays, every generated Flink differential case, the TPC-H
# pipelines through `streamjoin run` on jvm (about 2 hours on 2 cores).
test-all: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# Apache Flink 2.3.0 (PyFlink) in its own venv: it pins its own pyarrow/pandas/numpy.
FLINK_VENV := $(LOCAL)/flink-venv
FLINK_STAMP := $(LOCAL)/flink.stamp
N ?= 1000
SEED ?= 7

flink: $(FLINK_STAMP)

$(FLINK_STAMP): pyproject.toml
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/pip install --quiet --upgrade pip
	$(FLINK_VENV)/bin/pip install --quiet "$$($(PYTHON) -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["bench"][0])')"
	touch $@

# N generated cases (seed SEED), CHAINS chains of operators (chain_* families; default N/20, at least one
# per family) and WINDOWS window aggregates and as many window Top-N (window_*; default N/20) on Flink and through streamjoin; a summary per operator family.
# REUSE_FLINK=1 keeps the Flink outputs of an earlier run of the same cases (only streamjoin's side runs).
CHAINS ?=
WINDOWS ?=

flink-diff: setup flink
	$(PY) -m tests.flink_diff.run_diff --n $(N) --seed $(SEED) $(if $(CHAINS),--chains $(CHAINS)) $(if $(WINDOWS),--windows $(WINDOWS)) $(if $(REUSE_FLINK),--reuse-flink)

# Every stored differential case against its stored Flink output (make test replays a subset; 9–15 min, and the
# chains of operators at 1, 7 and 100 rows per micro-batch on both engines).
test-flink-diff: setup
	STREAMJOIN_FLINK_DIFF=all $(PY) -m pytest tests/test_flink_diff.py tests/test_flink_diff_chains.py

# Every operator on Spark native, the jvm and python engines and Flink, then each sql/ pipeline beside a
# Kafka -> Delta passthrough, on TPC-H at scale factor SF; appends the figures to bench/RESULTS.md (under 30 min at 0.1).
SF ?= 0.1

bench: setup flink
	$(PY) -m bench.run --scale-factor $(SF)

# Kill/restart trials (tests/reliability/chaos.py): TRIALS per stateful sql/ pipeline and engine, each
# SIGKILLing the running pipeline at chosen moments; a table of rows, duplicates and missing rows.
# CHAOS_ARGS: more options of the script, e.g. `--broker-faults 1 --engines jvm`.
TRIALS ?= 10
CHAOS_ARGS ?=

chaos: setup
	nice $(PY) -m tests.reliability.chaos --trials $(TRIALS) $(CHAOS_ARGS)

# Resource bounds (tests/reliability/bounds.py): one order with JOIN_ROWS line items through lineitem_with_order and
# one OVER partition of OVER_ROWS shipments through part_price_over, on each engine; time, state and memory per case.
JOIN_ROWS ?= 100000
OVER_ROWS ?= 1000000
BOUNDS_ARGS ?=

bounds: setup
	nice $(PY) -m tests.reliability.bounds --join-rows $(JOIN_ROWS) --over-rows $(OVER_ROWS) $(BOUNDS_ARGS)

# Sustained load (bench/sustained.py): the five stateful sql/ pipelines in one Spark driver under a fixed Kafka input
# rate for MINUTES minutes; RATE is records/s over all topics (empty: 75 % of a capacity measured first). State, lag
# and batch duration per minute go to bench/sustained.csv and .png and a table to bench/RESULTS.md.
# STATE_TTL (e.g. `STATE_TTL='5 min'`): every pipeline with that 'table.exec.state.ttl'.
MINUTES ?= 30
RATE ?=
STATE_TTL ?=
PLOT_STAMP := $(LOCAL)/plot.stamp

# matplotlib, for the plots: the `plot` extra, into the project's venv (not the `bench` extra: that is Flink's venv).
$(PLOT_STAMP): pyproject.toml | $(SETUP_STAMP)
	$(VENV)/bin/pip install --quiet -e '.[plot]'
	touch $@

sustained: setup $(PLOT_STAMP)
	nice $(PY) -m bench.sustained --minutes $(MINUTES) $(if $(RATE),--rate $(RATE)) $(if $(STATE_TTL),--state-ttl '$(STATE_TTL)')

dagster-ui: setup kafka
	mkdir -p $(LOCAL)/dagster && cp dagster_project/dagster.yaml $(LOCAL)/dagster/dagster.yaml
	# The storage is created before the services start: each of them would migrate a new one at once.
	DAGSTER_HOME=$(abspath $(LOCAL))/dagster $(VENV)/bin/dagster instance migrate
	# dagster dev gives each of its services up to 60 s to stop and leaves their run workers behind. It runs in
	# a process group of its own: Ctrl-C or SIGTERM interrupts the group (the webserver, the daemon, the code
	# server, runs and their Spark drivers), and what is left of it after 10 s is killed.
	DAGSTER_HOME=$(abspath $(LOCAL))/dagster setsid $(VENV)/bin/dagster dev -w workspace.yaml & dev=$$!; \
	    trap 'kill -INT -$$dev 2>/dev/null; n=0; while kill -0 -$$dev 2>/dev/null && [ $$n -lt 20 ]; \
	        do sleep 0.5; n=$$((n + 1)); done; kill -KILL -$$dev 2>/dev/null; exit 130' INT TERM; \
	    wait $$dev

clean:
	# The broker service lives in .local/kafka: stop it before its folder goes.
	if [ -x $(VENV)/bin/streamjoin ]; then $(VENV)/bin/streamjoin kafka stop; fi
	rm -rf $(LOCAL)
