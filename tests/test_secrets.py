"""Deployment values in SQL: ``${VAR}`` in ``properties.*`` options and secrets shown as ``******`` (Flink's
``isSensitive``)."""

import pytest

from streamjoin.errors import ValidationError
from streamjoin.planner import plan_script, sql_pipelines
from streamjoin.planner.connectors import HIDDEN_CONTENT, is_sensitive, redact

SECRET = "s3cr3t-do-not-print"

SQL = """CREATE TABLE events (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (
  'connector' = 'kafka', 'topic' = 'ev', 'format' = 'json',
  'properties.bootstrap.servers' = '${SJ_TEST_BOOTSTRAP}',
  'properties.security.protocol' = 'SASL_SSL',
  'properties.sasl.mechanism' = 'PLAIN',
  'properties.sasl.jaas.config' = 'PlainLoginModule required username="u" password="${SJ_TEST_SECRET}";'
);
CREATE TABLE out (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');
INSERT INTO out SELECT id FROM events;
"""


def test_flinks_sensitive_keys_are_hidden():
    assert [
        k
        for k in (
            "properties.sasl.jaas.config",
            "properties.ssl.key.password",
            "properties.ssl.truststore.password",
            "properties.sasl.oauthbearer.token.endpoint.url",
            "properties.SECRET",
            "properties.bootstrap.servers",
            "properties.security.protocol",
            "topic",
        )
        if is_sensitive(k)
    ] == [
        "properties.sasl.jaas.config",
        "properties.ssl.key.password",
        "properties.ssl.truststore.password",
        "properties.sasl.oauthbearer.token.endpoint.url",
        "properties.SECRET",
    ]
    assert redact({"properties.ssl.key.password": "pw", "topic": "t"}) == {
        "properties.ssl.key.password": HIDDEN_CONTENT,
        "topic": "t",
    }


def test_environment_variables_reach_sparks_kafka_reader_and_only_there(monkeypatch):
    monkeypatch.setenv("SJ_TEST_SECRET", SECRET)
    monkeypatch.setenv("SJ_TEST_BOOTSTRAP", "broker:9093")
    script = plan_script(SQL, "secret.sql")
    [pipeline] = sql_pipelines(script)
    [source] = pipeline.sources
    assert source.options == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": f'PlainLoginModule required username="u" password="{SECRET}";',
    }
    # The declared options keep the text as written; the plan and the source's repr do not show the value.
    assert "${SJ_TEST_SECRET}" in script.catalog.tables["events"].options["properties.sasl.jaas.config"]
    assert (
        SECRET not in repr(source)
        and SECRET not in pipeline.explain
        and SECRET not in repr(script.catalog.tables["events"])
    )
    from streamjoin.planner.pipelines import bootstrap_servers

    assert bootstrap_servers([pipeline]) == "broker:9093"


def test_a_missing_variable_names_the_table_option_and_variable(monkeypatch):
    monkeypatch.setenv("SJ_TEST_BOOTSTRAP", "broker:9093")
    monkeypatch.delenv("SJ_TEST_SECRET", raising=False)
    with pytest.raises(ValidationError) as info:
        sql_pipelines(plan_script(SQL, "secret.sql"))
    assert str(info.value) == (
        "secret.sql:6:3: table 'events': option 'properties.sasl.jaas.config' names environment "
        "variable 'SJ_TEST_SECRET', which is not set [rule: option-environment]"
    )


def test_explain_needs_no_secret(monkeypatch):
    monkeypatch.delenv("SJ_TEST_SECRET", raising=False)
    assert "TableSourceScan" in plan_script(SQL, "secret.sql").statements[0].explain


def test_only_kafka_properties_are_substituted():
    with pytest.raises(
        ValidationError,
        match=r"secret.sql:1:\d+: table 'ev': option 'topic' names an environment variable; "
        r"only 'properties.\*' options are substituted \[rule: option-environment\]",
    ):
        plan_script(
            "CREATE TABLE ev (id BIGINT) WITH ('connector' = 'kafka', 'topic' = '${T}', 'format' = 'json');",
            "secret.sql",
        )


def test_a_like_conflict_does_not_print_a_secret_option():
    with pytest.raises(ValidationError) as info:
        plan_script(
            "CREATE TABLE a (id BIGINT) WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json', "
            "'properties.ssl.key.password' = 'literal-pw');\n"
            "CREATE TABLE b WITH ('properties.ssl.key.password' = 'x') LIKE a (INCLUDING OPTIONS);",
            "like.sql",
        )
    assert "literal-pw" not in str(info.value) and f"('{HIDDEN_CONTENT}')" in str(info.value)
