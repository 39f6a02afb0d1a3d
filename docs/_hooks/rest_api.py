"""MkDocs hook: the REST API reference, from the app's own OpenAPI document.

The app is built but never served, so its runtime (the metadata store) is never opened. The
document is published beside the page as `reference/openapi.json`."""

from __future__ import annotations

import json
from typing import Any

from mkdocs.structure.files import File, Files

from connect_core.rest.app import create_app

PAGE = "reference/rest-api.md"
METHODS = ("get", "post", "put", "patch", "delete")


def on_files(files: Files, config: Any) -> Files:
    spec = create_app(_no_runtime).openapi()
    files.append(File.generated(config, "reference/openapi.json", content=json.dumps(spec, indent=2)))
    files.append(File.generated(config, PAGE, content=rest_markdown(spec)))
    return files


def _no_runtime() -> Any:
    raise RuntimeError("the docs build never serves a request")


def rest_markdown(spec: dict[str, Any]) -> str:
    lines = [
        "# REST API routes",
        "",
        f"Generated from the OpenAPI document of `connect serve` ({spec['info']['title']}"
        f" {spec['info']['version']}); the document itself: [openapi.json](openapi.json).",
        "How the API behaves (dialects, paging, auth): [REST API](../rest.md).",
        "",
    ]
    for path, operations in spec["paths"].items():
        for method in METHODS:
            if method in operations:
                lines += _operation(method, path, operations[method])
    return "\n".join(lines) + "\n"


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", ""]
    summary, description = op.get("summary", "").strip(), op.get("description", "").strip()
    if summary and summary.rstrip(".") not in description:  # FastAPI repeats a docstring's first line
        lines += [f"**{summary}**", ""]
    if description:
        lines += [description, ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | required | type | description |", "|---|---|---|---|---|"]
        for p in params:
            cell = (p.get("description") or "").replace("\n", " ").replace("|", "\\|")
            kind = _schema_name(p.get("schema", {}))
            lines.append(f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | {kind} | {cell} |")
        lines.append("")
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines += [f"Request body ({media}): {_schema_name(content.get('schema', {}))}", ""]
    responses = [f"{status} {_response_schema(r)}" for status, r in op.get("responses", {}).items()]
    if responses:
        lines += ["Responses: " + ", ".join(f"`{r}`" for r in responses), ""]
    return lines


def _response_schema(response: dict[str, Any]) -> str:
    contents: list[dict[str, Any]] = list(response.get("content", {}).values())
    return _schema_name(contents[0].get("schema", {})) if contents else "(no body)"


def _schema_name(schema: dict[str, Any]) -> str:
    """A schema's name as the document has it: a `$ref`'s last part, an array of one, or its type."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items', {}))}"
    if "anyOf" in schema:
        return " or ".join(_schema_name(s) for s in schema["anyOf"])
    return str(schema.get("type", "any"))
