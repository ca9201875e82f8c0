# Two commands for a newcomer: `make demo` and `make test`. Each brings a fresh
# machine to a working state by itself (virtual environment, Python packages,
# JVM jars for Spark and for the embedded Kafka broker, from Maven Central), once.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOCAL := .local
SETUP_STAMP := $(LOCAL)/setup.stamp

.PHONY: setup demo test dagster-ui clean

setup: $(SETUP_STAMP)

$(SETUP_STAMP): pyproject.toml jvm/kafka-broker/pom.xml jvm/spark-packages/pom.xml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	mvn --batch-mode --quiet -f jvm/kafka-broker/pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(LOCAL))/jars/kafka-broker -DincludeScope=runtime
	mvn --batch-mode --quiet -f jvm/spark-packages/pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(LOCAL))/jars/spark -DincludeScope=runtime
	touch $@

demo: setup
	$(PY) -m dagster_project.demo

test: setup
	$(PY) -m pytest

dagster-ui: setup
	mkdir -p $(LOCAL)/dagster && cp dagster_project/dagster.yaml $(LOCAL)/dagster/dagster.yaml
	DAGSTER_HOME=$(abspath $(LOCAL))/dagster $(VENV)/bin/dagster dev -w workspace.yaml

clean:
	rm -rf $(LOCAL)
