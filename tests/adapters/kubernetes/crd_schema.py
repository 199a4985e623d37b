"""Structural validation of objects against the OpenAPI v3 schemas inside CRDs.

``jsonschema`` is not a dependency of this project, so this checks the subset of OpenAPI v3
that CRD schemas use: ``type``, ``properties`` (unknown fields are errors unless
``x-kubernetes-preserve-unknown-fields``), ``required``, ``items``, ``additionalProperties``,
``enum``, ``minimum``/``maximum``, ``minLength``/``maxLength``, ``minItems``/``maxItems``,
``pattern``, ``format: date-time``, ``x-kubernetes-int-or-string``, ``anyOf`` and list-map key
uniqueness. CEL rules (``x-kubernetes-validations``) are not evaluated.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

CRD_DIR = Path(__file__).resolve().parents[2] / "data" / "kubernetes" / "crds"

_FILES = {
    ("kueue.x-k8s.io", "Workload"): "kueue.x-k8s.io_workloads.json",
    ("kueue.x-k8s.io", "AdmissionCheck"): "kueue.x-k8s.io_admissionchecks.json",
    ("kueue.x-k8s.io", "ClusterQueue"): "kueue.x-k8s.io_clusterqueues.json",
    ("kueue.x-k8s.io", "LocalQueue"): "kueue.x-k8s.io_localqueues.json",
    ("kueue.x-k8s.io", "ResourceFlavor"): "kueue.x-k8s.io_resourceflavors.json",
    ("jobset.x-k8s.io", "JobSet"): "jobset.x-k8s.io_jobsets.json",
    ("kubeflow.org", "PyTorchJob"): "kubeflow.org_pytorchjobs.json",
    ("trainer.kubeflow.org", "TrainJob"): "trainer.kubeflow.org_trainjobs.json",
}


@functools.cache
def schema_for(api_version: str, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of ``kind`` at ``api_version`` (KeyError when not a known CRD)."""
    group, version = api_version.split("/")
    crd = json.loads((CRD_DIR / _FILES[(group, kind)]).read_text())
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version and entry.get("served"):
            return dict(entry["schema"]["openAPIV3Schema"])
    raise KeyError(f"{api_version} {kind} is not served by the CRD")


def is_custom(obj: dict[str, Any]) -> bool:
    """True when ``obj`` is of a CRD kind with a schema here."""
    api_version = str(obj.get("apiVersion", ""))
    return "/" in api_version and (api_version.split("/", maxsplit=1)[0], obj.get("kind")) in _FILES


def validate(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Errors of ``obj`` against ``schema`` (empty: valid)."""
    errors: list[str] = []
    where = path or "<root>"
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(obj, int | str) or isinstance(obj, bool):
            errors.append(f"{where}: expected int or string")
        return errors
    if "anyOf" in schema and "type" not in schema:
        if not any(
            not validate(obj, {**schema, **alt, "anyOf": None}, path)
            for alt in schema["anyOf"]
            if alt
        ):
            errors.append(f"{where}: matches none of anyOf")
        return errors
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(obj, dict):
            return [f"{where}: expected object"]
        for name in schema.get("required", []):
            if name not in obj:
                errors.append(f"{where}: missing required {name!r}")
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            sub = f"{path}.{key}" if path else key
            if props is not None and key in props:
                errors += validate(value, props[key], sub)
            elif isinstance(extra, dict):
                errors += validate(value, extra, sub)
            elif (
                props is not None
                and not schema.get("x-kubernetes-preserve-unknown-fields")
                and not (path == "" and key in ("apiVersion", "kind", "metadata"))
            ):
                errors.append(f"{sub}: unknown field")
        if "minProperties" in schema and len(obj) < schema["minProperties"]:
            errors.append(f"{where}: fewer than {schema['minProperties']} properties")
    elif kind == "array":
        if not isinstance(obj, list):
            return [f"{where}: expected array"]
        if "maxItems" in schema and len(obj) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
        if "minItems" in schema and len(obj) < schema["minItems"]:
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        keys = schema.get("x-kubernetes-list-map-keys")
        if keys:
            seen = [tuple(i.get(k) for k in keys) for i in obj if isinstance(i, dict)]
            if len(seen) != len(set(seen)):
                errors.append(f"{where}: duplicate list-map keys {keys}")
        for n, item in enumerate(obj):
            errors += validate(item, schema.get("items", {}), f"{path}[{n}]")
    elif kind == "string":
        if not isinstance(obj, str):
            return [f"{where}: expected string"]
        if "maxLength" in schema and len(obj) > schema["maxLength"]:
            errors.append(f"{where}: longer than {schema['maxLength']}")
        if "minLength" in schema and len(obj) < schema["minLength"]:
            errors.append(f"{where}: shorter than {schema['minLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], obj):
            errors.append(f"{where}: {obj!r} does not match {schema['pattern']}")
        if schema.get("format") == "date-time":
            try:
                datetime.fromisoformat(obj.replace("Z", "+00:00"))
            except ValueError:
                errors.append(f"{where}: {obj!r} is not RFC 3339")
    elif kind == "integer":
        if not isinstance(obj, int) or isinstance(obj, bool):
            return [f"{where}: expected integer"]
    elif kind == "number":
        if not isinstance(obj, int | float) or isinstance(obj, bool):
            return [f"{where}: expected number"]
    elif kind == "boolean" and not isinstance(obj, bool):
        return [f"{where}: expected boolean"]
    if kind in ("integer", "number") and not errors:
        if "minimum" in schema and obj < schema["minimum"]:
            errors.append(f"{where}: below {schema['minimum']}")
        if "maximum" in schema and obj > schema["maximum"]:
            errors.append(f"{where}: above {schema['maximum']}")
    if "enum" in schema and obj not in schema["enum"]:
        errors.append(f"{where}: {obj!r} not in {schema['enum']}")
    return errors


def validate_object(obj: dict[str, Any]) -> list[str]:
    """Errors of a custom object against its CRD's schema."""
    return validate(obj, schema_for(obj["apiVersion"], obj["kind"]))
