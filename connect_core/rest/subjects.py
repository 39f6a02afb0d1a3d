"""Confluent Schema Registry's read API over the topics' schema histories.

Each topic with a schema history is the subject `<topic>-value` (Confluent's TopicNameStrategy);
its versions are the history's, each schema an Avro record (`runtime.topics.avro`). Answers and
errors have Schema Registry's shapes, so its clients read them unchanged:

* `GET /subjects` → `["orders-value", …]`
* `GET /subjects/{subject}/versions` → `[1, 2]`
* `GET /subjects/{subject}/versions/{version}` (a number, `latest` or -1) →
  `{"subject", "id", "version", "schema", "metadata"}`
* `GET /subjects/{subject}/versions/{version}/schema` → the Avro schema itself
* `GET /schemas/ids/{id}` → `{"schema", "metadata"}`

`metadata.properties` (Schema Registry's data-contract metadata) says what Avro does not: the run
and connector that introduced the version, when, its fingerprint and its canonical schema
(`connect.schema`: Spark's types, the key columns), which the CLI reads over REST. Errors:
404 with `error_code` 40401 (no such subject), 40402 (no such version), 40403 (no such schema id),
422 with 42202 (not a version id).

The history is written by the runs' commits only, so the registry is what Schema Registry calls
READONLY with compatibility NONE (every new shape is a version), and answers its clients' other
calls as such: a lookup (`POST /subjects/{subject}`) finds the version whose Avro schema is the one
given (40403 when none is), a compatibility test passes, `GET /mode` and `GET /config` say READONLY
and NONE, and every write (register, delete, a config or mode change) is 422 with 42205, read-only.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query
from fastapi.responses import JSONResponse, Response

from connect_core.rest.deps import service
from connect_core.rest.errors import storable_params
from connect_core.rest.service import ConnectService
from connect_core.runtime.security import mask_text
from connect_core.runtime.topics.avro import avro_schema, avro_text
from connect_core.runtime.topics.store import check_topic_name
from connect_core.sdk.errors import ConfigError, NotFoundError

__all__ = ["SUBJECT_SUFFIX", "from_registry_body", "registry_body", "router", "subject_of"]

router = APIRouter(tags=["Schema Registry (subjects)"], dependencies=[Depends(storable_params)])
Svc = Annotated[ConnectService, Depends(service)]

SUBJECT_SUFFIX = "-value"
MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
_MAX_VERSION = 2**31 - 1  # Schema Registry's version ids: [1, 2^31-1]
_MAX_ID = 2**63 - 1
_SHOWN_CHARS = 200  # of a subject or version echoed in an error


def subject_of(topic: str) -> str:
    return topic + SUBJECT_SUFFIX


def _topic_of(subject: str) -> str | None:
    """The topic whose value subject `subject` is, or None (another strategy's name, no topic's name)."""
    if not subject.endswith(SUBJECT_SUFFIX) or len(subject) > 249 + len(SUBJECT_SUFFIX):
        return None
    topic = subject.removesuffix(SUBJECT_SUFFIX)
    try:
        return check_topic_name(topic)
    except ConfigError:
        return None


def _shown(text: str) -> str:
    text = mask_text(text[: _SHOWN_CHARS * 4])
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _error(status: int, code: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": code, "message": message}, status_code=status, media_type=MEDIA_TYPE)


def _no_subject(subject: str) -> JSONResponse:
    return _error(404, 40401, f"Subject '{_shown(subject)}' not found.")


def _bad_version(version: str) -> JSONResponse:
    return _error(
        422,
        42202,
        f"The specified version '{_shown(version)}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


def _version_id(text: str) -> int | bool | None:
    """Schema Registry's version id: None for the latest (`latest` or -1), a number in [1, 2^31-1],
    or False when `text` is neither (checked by its characters before it is read as a number)."""
    if text in ("latest", "-1"):
        return None
    if not (0 < len(text) <= 10 and text.isascii() and text.isdigit()):
        return False
    number = int(text)
    return number if 1 <= number <= _MAX_VERSION else False


def _json(value: Any) -> JSONResponse:
    return JSONResponse(value, media_type=MEDIA_TYPE)


def registry_body(found: dict[str, Any]) -> dict[str, Any]:
    """A schema version (`Management.topic_schema`) as Schema Registry answers it."""
    properties = {
        "connect.run.id": str(found["run_id"]),
        "connect.created.at": str(found["created_at"]),
        "connect.fingerprint": found["fingerprint"],
        "connect.schema": json.dumps(found["schema"], separators=(",", ":"), ensure_ascii=False),
    }
    if found.get("connector"):
        properties["connect.connector"] = found["connector"]
    return {
        "subject": subject_of(found["topic"]),
        "version": found["version"],
        "id": found["id"],
        "schema": avro_text(found["topic"], found["schema"]),
        "metadata": {"properties": properties},
    }


def from_registry_body(body: dict[str, Any]) -> dict[str, Any]:
    """`registry_body`'s inverse: the schema version as `Management.topic_schema` gives it."""
    meta = (body.get("metadata") or {}).get("properties") or {}
    return {
        "topic": str(body["subject"]).removesuffix(SUBJECT_SUFFIX),
        "version": body["version"],
        "id": body["id"],
        "fingerprint": meta.get("connect.fingerprint"),
        "run_id": int(meta["connect.run.id"]) if "connect.run.id" in meta else None,
        "connector": meta.get("connect.connector"),
        "created_at": meta.get("connect.created.at"),
        "schema": json.loads(meta["connect.schema"]) if "connect.schema" in meta else {},
    }


def _page(items: list[Any], offset: int, limit: int) -> list[Any]:
    """Schema Registry's paging: from `offset`, at most `limit` (negative: all)."""
    items = items[max(offset, 0) :]
    return items if limit < 0 else items[:limit]


Offset = Annotated[int, Query(ge=0)]
Limit = Annotated[int, Query(ge=-1)]
#: Schema Registry's name of the flag; its Python client sends `deleted_only`. No history is ever
#: soft-deleted, so either asks for nothing.
DeletedOnly = Annotated[bool, Query(alias="deletedOnly")]


@router.get("/subjects", summary="Schema Registry: the subjects (`<topic>-value` of each topic with a schema history)")
def list_subjects(
    svc: Svc,
    subject_prefix: Annotated[str, Query(alias="subjectPrefix", max_length=300)] = "",
    deleted: bool = False,
    deleted_only: bool = False,
    deleted_only_camel: DeletedOnly = False,
    offset: Offset = 0,
    limit: Limit = -1,
) -> Response:
    if deleted_only or deleted_only_camel:  # a history is never soft-deleted: it goes with its topic
        return _json([])
    subjects = [subject_of(t) for t in svc.schema_topics()]
    return _json(_page([s for s in subjects if s.startswith(subject_prefix)], offset, limit))


@router.get("/subjects/{subject}/versions", summary="Schema Registry: a subject's versions")
def list_versions(
    svc: Svc,
    subject: str,
    deleted: bool = False,
    deleted_only: bool = False,
    deleted_only_camel: DeletedOnly = False,
    offset: Offset = 0,
    limit: Limit = -1,
) -> Response:
    topic = _topic_of(subject)
    versions = svc.schema_versions(topic) if topic is not None else []
    if not versions:
        return _no_subject(subject)
    return _json([] if deleted_only or deleted_only_camel else _page(versions, offset, limit))


def _version(svc: ConnectService, subject: str, version: str) -> dict[str, Any] | JSONResponse:
    number = _version_id(version)
    if number is False:
        return _bad_version(version)
    topic = _topic_of(subject)
    if topic is None or not svc.schema_versions(topic):
        return _no_subject(subject)
    try:
        return svc.topic_schema(topic, None if number is None else int(number))
    except NotFoundError:
        return _error(404, 40402, f"Version {_shown(version)} not found.")


@router.get(
    "/subjects/{subject}/versions/{version}",
    summary="Schema Registry: one version of a subject (a number, `latest` or -1), its schema as Avro",
)
def get_version(svc: Svc, subject: str, version: str, deleted: bool = False) -> Response:
    found = _version(svc, subject, version)
    return found if isinstance(found, JSONResponse) else _json(registry_body(found))


@router.get("/subjects/{subject}/versions/{version}/schema", summary="Schema Registry: one version's Avro schema alone")
def get_version_schema(svc: Svc, subject: str, version: str, deleted: bool = False) -> Response:
    found = _version(svc, subject, version)
    if isinstance(found, JSONResponse):
        return found
    return Response(avro_text(found["topic"], found["schema"]), media_type=MEDIA_TYPE)


@router.get("/schemas/ids/{schema_id}", summary="Schema Registry: a schema by its id (unique over every subject)")
def get_schema_by_id(svc: Svc, schema_id: str, subject: str | None = None) -> Response:
    number = int(schema_id) if 0 < len(schema_id) <= 19 and schema_id.isascii() and schema_id.isdigit() else 0
    found = svc.schema_by_id(number) if 1 <= number <= _MAX_ID else None
    if found is None or (subject is not None and subject != subject_of(found["topic"])):
        return _error(404, 40403, f"Schema {_shown(schema_id)} not found.")
    body = registry_body(found)
    return _json({"schema": body["schema"], "metadata": body["metadata"]})


# -- What a read-only registry with compatibility NONE answers to the clients' other calls --------

_READ_ONLY_WHY = (
    "a topic's schema versions are made by the commits of the runs that write to it; registering, "
    "deleting and changing the configuration or mode are not served"
)


def _subject_topic(svc: ConnectService, subject: str) -> str | JSONResponse:
    """The topic of `subject` when it has a history, else Schema Registry's 40401."""
    topic = _topic_of(subject)
    if topic is None or not svc.schema_versions(topic):
        return _no_subject(subject)
    return topic


def _posted_avro(body: dict[str, Any]) -> Any:
    """The Avro schema of a lookup's or compatibility test's body, parsed; Schema Registry's 42201
    when it is no JSON text (a schema of another type parses as whatever it is, and matches nothing)."""
    text = body.get("schema")
    if isinstance(text, str):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            pass
    return _error(422, 42201, "Invalid schema: `schema` must be the schema's JSON text.")


Posted = Annotated[dict[str, Any], Body()]


@router.post("/subjects/{subject}", summary="Schema Registry: the version of a subject whose schema is the one given")
def lookup_schema(svc: Svc, subject: str, body: Posted, deleted: bool = False, normalize: bool = False) -> Response:
    topic = _subject_topic(svc, subject)
    if isinstance(topic, JSONResponse):
        return topic
    given = _posted_avro(body)
    if isinstance(given, JSONResponse):
        return given
    if body.get("schemaType", "AVRO") == "AVRO":
        for version in reversed(svc.schema_versions(topic)):  # one at a time: a history can be long
            found = svc.topic_schema(topic, version)
            if avro_schema(topic, found["schema"]) == given:
                return _json(registry_body(found))
    return _error(404, 40403, "Schema not found")


@router.post(
    "/compatibility/subjects/{subject}/versions/{version}",
    summary="Schema Registry: whether a schema is compatible with a version (compatibility NONE: it is)",
)
def test_compatibility(svc: Svc, subject: str, version: str, body: Posted, verbose: bool = False) -> Response:
    found = _version(svc, subject, version)
    if isinstance(found, JSONResponse):
        return found
    return _compatible(body, verbose)


@router.post(
    "/compatibility/subjects/{subject}/versions",
    summary="Schema Registry: whether a schema is compatible with every version (compatibility NONE: it is)",
)
def test_compatibility_all(svc: Svc, subject: str, body: Posted, verbose: bool = False) -> Response:
    topic = _subject_topic(svc, subject)
    return topic if isinstance(topic, JSONResponse) else _compatible(body, verbose)


def _compatible(body: dict[str, Any], verbose: bool) -> Response:
    given = _posted_avro(body)
    if isinstance(given, JSONResponse):
        return given
    return _json({"is_compatible": True, "messages": []} if verbose else {"is_compatible": True})


@router.get("/config", summary="Schema Registry: the compatibility level (NONE: every new shape is a version)")
def get_config() -> Response:
    return _json({"compatibilityLevel": "NONE"})


@router.get("/config/{subject}", summary="Schema Registry: a subject's compatibility level (NONE)")
def get_subject_config(svc: Svc, subject: str) -> Response:
    topic = _subject_topic(svc, subject)
    return topic if isinstance(topic, JSONResponse) else get_config()


@router.get("/mode", summary="Schema Registry: the mode (READONLY: the runs' commits write the history)")
def get_mode() -> Response:
    return _json({"mode": "READONLY"})


@router.get("/mode/{subject}", summary="Schema Registry: a subject's mode (READONLY)")
def get_subject_mode(svc: Svc, subject: str) -> Response:
    topic = _subject_topic(svc, subject)
    return topic if isinstance(topic, JSONResponse) else get_mode()


def _read_only(subject: str | None = None) -> JSONResponse:
    what = f"Subject '{_shown(subject)}'" if subject is not None else "The schema registry"
    return _error(422, 42205, f"{what} is in read-only mode: {_READ_ONLY_WHY}.")


@router.post("/subjects/{subject}/versions", summary="Schema Registry's register: refused (read-only)")
def register_schema(subject: str) -> Response:
    return _read_only(subject)


@router.delete("/subjects/{subject}", summary="Schema Registry's subject deletion: refused (read-only)")
def delete_subject(subject: str) -> Response:
    return _read_only(subject)


@router.delete("/subjects/{subject}/versions/{version}", summary="Schema Registry's version deletion: refused")
def delete_version(subject: str, version: str) -> Response:
    return _read_only(subject)


@router.put("/config", summary="Schema Registry's compatibility change: refused (read-only)")
@router.delete("/config", summary="Schema Registry's compatibility reset: refused (read-only)")
@router.put("/mode", summary="Schema Registry's mode change: refused (read-only)")
@router.delete("/mode", summary="Schema Registry's mode reset: refused (read-only)")
def change_global() -> Response:
    return _read_only()


@router.put("/config/{subject}", summary="Schema Registry's subject compatibility change: refused (read-only)")
@router.delete("/config/{subject}", summary="Schema Registry's subject compatibility reset: refused (read-only)")
@router.put("/mode/{subject}", summary="Schema Registry's subject mode change: refused (read-only)")
@router.delete("/mode/{subject}", summary="Schema Registry's subject mode reset: refused (read-only)")
def change_subject(subject: str) -> Response:
    return _read_only(subject)
