# One image for every service of docker-compose.yml: Airflow (api-server, scheduler,
# dag-processor, triggerer), `connect serve`, and the Spark standalone master and workers.
# Build: docker build -t connect-core:local .   (docker compose up --build does it)
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# Java 17 for Spark; procps (`ps`) for Spark's launch scripts; the JDBC drivers
# (their jars land in /usr/share/java: postgresql.jar, mariadb-java-client.jar).
# The man directory works around openjdk's postinst on slim images. Versions come from the
# base image's Debian release (bookworm), not pinned: point releases retire old ones.
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      openjdk-17-jre-headless procps libpostgresql-jdbc-java libmariadb-java \
 && rm -rf /var/lib/apt/lists/*

# Non-root. The directories that docker-compose.yml mounts named volumes on exist here,
# owned by this user, so that new volumes are created writable by it.
RUN groupadd --gid 50000 connect \
 && useradd --uid 50000 --gid connect --create-home --shell /bin/bash connect \
 && mkdir -p /data/topics /home/connect/airflow/logs /home/connect/.connect /home/connect/spark-work \
 && chown -R connect:connect /data /home/connect

WORKDIR /opt/connect

# Dependencies first, from pyproject.toml and the constraints only, so that a change
# of the source does not reinstall Airflow and Spark: a stub package stands in for
# connect_core while pip resolves, and is uninstalled afterwards.
COPY pyproject.toml ./
COPY requirements/ requirements/
RUN mkdir connect_core && touch connect_core/__init__.py README.md \
 && pip install -c requirements/constraints.txt ".[airflow]" \
 && pip uninstall -y connect-core \
 && rm -rf connect_core README.md build connect_core.egg-info

# The project, installed in editable mode. The package ships migrations/, dags/ and plugins/ as
# connect_core/_migrations, _dags and _plugins, symlinks to the folders copied here (a wheel
# holds copies instead; see pyproject.toml): so the runtime's migrations and the folders Airflow
# reads (docker-compose.yml's AIRFLOW__CORE__DAGS_FOLDER and PLUGINS_FOLDER) are these.
COPY README.md ./
COPY migrations/ migrations/
COPY dags/ dags/
COPY plugins/ plugins/
COPY connect_core/ connect_core/
RUN pip install -c requirements/constraints.txt -e ".[airflow]" \
 && rm -rf build

# pip puts pyspark's launchers (spark-submit, spark-class, find-spark-home, find_spark_home.py)
# into /usr/local/bin, which is on PATH; they locate SPARK_HOME (the pyspark package) themselves,
# so no SPARK_HOME is set. Check that at build time rather than at the first task run; and that
# the package's DAG and plugin folders are the ones docker-compose.yml gives Airflow.
RUN PYSPARK_DIR="$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" \
 && test -x "$PYSPARK_DIR/bin/spark-class" \
 && test "$(command -v spark-class)" = /usr/local/bin/spark-class \
 && test "$(command -v spark-submit)" = /usr/local/bin/spark-submit \
 && spark-submit --version \
 && connect --help >/dev/null \
 && test "$(connect airflow dags-path)" = /opt/connect/dags \
 && test "$(connect airflow plugins-path)" = /opt/connect/plugins \
 && ls /usr/share/java/postgresql.jar /usr/share/java/mariadb-java-client.jar

ENV CONNECT_HOME=/home/connect/.connect \
    CONNECT_JVM_ARCHIVE_DIR=/home/connect/.cache/connect-core \
    AIRFLOW_HOME=/home/connect/airflow \
    SPARK_WORKER_DIR=/home/connect/spark-work

# Numeric, so that a runtime can tell it is not root (e.g. Kubernetes' runAsNonRoot).
USER 50000:50000

# The Spark driver JVM's class-data archive (connect_core/runtime/execution/jvm_archive.py), made for this
# image's JVM and Spark: every spark-submit of a task starts from it, seconds sooner.
RUN SPARK_LOCAL_IP=127.0.0.1 connect spark-archive
CMD ["connect", "--help"]
