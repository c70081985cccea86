"""Enough of kustomize to render this project's k8s/ offline: resources, components, namespace,
JSON 6902 patches, images (newName, newTag, digest).

Used by the tests so the rendering check runs where ``kubectl`` is absent; anything this
renderer does not understand fails loudly rather than being skipped.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

CLUSTER_SCOPED = {"Namespace", "PersistentVolume", "StorageClass", "ClusterRole",
                  "ClusterRoleBinding"}
KNOWN_FIELDS = {"apiVersion", "kind", "namespace", "resources", "components", "patches", "images"}


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _kustomization(directory: Path, kind: str) -> dict[str, Any]:
    kust: dict[str, Any] = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kust) - KNOWN_FIELDS
    if unknown:
        raise ValueError(f"{directory}: fields this renderer does not handle: {sorted(unknown)}")
    if kust.get("kind", "Kustomization") != kind:
        raise ValueError(f"{directory}: a {kust.get('kind', 'Kustomization')} where a {kind} is listed")
    return kust


def render(directory: Path) -> list[dict[str, Any]]:
    """Every resource of a kustomization, namespaced and patched."""
    docs: list[dict[str, Any]] = []
    _accumulate(directory, _kustomization(directory, "Kustomization"), docs)
    return docs


def _accumulate(directory: Path, kust: dict[str, Any], docs: list[dict[str, Any]]) -> None:
    """Add the resources, then let each component add its own and transform them all, then this
    kustomization's own transformations (kustomize's order). A component works on ``docs``, the
    resources of the kustomization that lists it."""
    for entry in kust.get("resources", []):
        path = (directory / entry).resolve()
        if not path.exists():
            raise FileNotFoundError(f"{directory}/kustomization.yaml lists missing {entry}")
        docs += render(path) if path.is_dir() else load_docs(path)
    for entry in kust.get("components", []):
        path = (directory / entry).resolve()
        _accumulate(path, _kustomization(path, "Component"), docs)
    _transform(docs, kust)


def _transform(docs: list[dict[str, Any]], kust: dict[str, Any]) -> None:
    """This kustomization's namespace, then its patches, then its image changes (kustomize's order)."""
    if "namespace" in kust:
        for doc in docs:
            if doc["kind"] not in CLUSTER_SCOPED:
                doc.setdefault("metadata", {})["namespace"] = kust["namespace"]
    for patch in kust.get("patches", []):
        _apply(docs, patch)
    for image in kust.get("images", []):
        for container in containers(docs):
            container["image"] = set_image(container["image"], image)


def by_name(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The rendered resources by (kind, name); a pair twice is an error."""
    out = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    if len(out) != len(docs):
        raise ValueError("a kind/name pair appears twice")
    return out


def containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every container (and init container) of the pods, pod templates and job templates."""
    found: list[dict[str, Any]] = []
    for doc in docs:
        spec = doc.get("spec", {})
        pod = spec.get("template", {}).get("spec", spec) if isinstance(spec, dict) else {}
        found += pod.get("initContainers", []) + pod.get("containers", [])
    return found


def set_image(ref: str, entry: dict[str, str]) -> str:
    """kustomize's ``images:`` entry applied to one image reference (untouched if the name differs)."""
    name, tag, digest = split_image(ref)
    if name != entry["name"]:
        return ref
    unknown = set(entry) - {"name", "newName", "newTag", "digest"}
    if unknown:
        raise ValueError(f"images entry {entry}: fields this renderer does not handle: {sorted(unknown)}")
    name = entry.get("newName", name)
    if "digest" in entry:
        return f"{name}@{entry['digest']}"
    tag = entry.get("newTag", tag)
    return name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def split_image(ref: str) -> tuple[str, str | None, str | None]:
    """``name[:tag][@digest]`` -> (name, tag, digest); a registry port is not a tag."""
    rest, _, digest = ref.partition("@")
    name, tag = rest, None
    if ":" in rest.rsplit("/", 1)[-1]:
        name, tag = rest.rsplit(":", 1)
    return name, tag, digest or None


def _apply(docs: list[dict[str, Any]], patch: dict[str, Any]) -> None:
    target = patch["target"]
    matches = [d for d in docs if d["kind"] == target["kind"]
               and d["metadata"]["name"] == target["name"]]
    if len(matches) != 1:
        raise ValueError(f"patch target {target} matches {len(matches)} resources")
    for op in yaml.safe_load(patch["patch"]):
        json_patch(matches[0], op)


def json_patch(doc: dict[str, Any], op: dict[str, Any]) -> None:
    """RFC 6902 add/replace/remove; the path must exist (except the last step of add)."""
    steps = [s.replace("~1", "/").replace("~0", "~") for s in op["path"].strip("/").split("/")]
    parent: Any = doc
    for step in steps[:-1]:
        parent = parent[int(step)] if isinstance(parent, list) else parent[step]
    last = steps[-1]
    key: Any = int(last) if isinstance(parent, list) else last
    if op["op"] in ("replace", "remove"):
        parent[key]
    if op["op"] == "remove":
        del parent[key]
    elif op["op"] in ("replace", "add"):
        parent[key] = copy.deepcopy(op["value"])
    else:
        raise ValueError(f"unsupported patch op {op['op']}")
