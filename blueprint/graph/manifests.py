"""Write every Kubernetes object and every Helm release's values of a graph as YAML files.

For review (what will the cluster contain?) and for GitOps users who apply the manifests with Argo CD
or Flux instead of Pulumi. Files are named ``<kind>/<namespace>-<name>.yaml`` (cluster-scoped objects
without the namespace) and ``helm/<release>.values.yaml`` with the chart coordinates in a header.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from blueprint.files.output import write_inside
from blueprint.graph.model import ResourceGraph

RELEASE = "kubernetes:helm.sh/v3:Release"


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (embedded configs stay readable)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _dump(value: Any) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def _manifest(inputs: dict[str, Any]) -> dict[str, Any]:
    """apiVersion, kind, metadata first, then the rest; keys sorted below that, so files are stable."""
    ordered: dict[str, Any] = {k: _sorted(inputs[k]) for k in ("apiVersion", "kind", "metadata") if k in inputs}
    ordered.update({k: _sorted(v) for k, v in sorted(inputs.items()) if k not in ordered})
    return ordered


def write_manifests(graph: ResourceGraph, out_dir: Path) -> list[Path]:
    """Write the files; return their paths (sorted). Existing files of the same name are replaced."""
    written: list[Path] = []
    for res in graph.resources:
        if not res.type.startswith("kubernetes:") or res.is_provider or res.inputs.get("kind") == "Secret":
            continue  # Secrets carry generated credentials: they are never written to files
        if res.type == RELEASE:
            inputs = res.inputs
            repo = (inputs.get("repositoryOpts") or {}).get("repo", "")
            header = (f"# chart: {inputs.get('chart')} {inputs.get('version')}"
                      + (f" from {repo}" if repo else "") + f"\n# namespace: {inputs.get('namespace')}\n")
            parts = ("helm", f"{inputs.get('name', res.name)}.values.yaml")
            body = _dump(_sorted(inputs.get("values", {})))
            text = header + body
        else:
            meta = res.inputs.get("metadata", {})
            stem = f"{meta['namespace']}-{meta['name']}" if "namespace" in meta else str(meta.get("name", res.name))
            parts = (str(res.inputs.get("kind", "Object")).lower(), f"{stem}.yaml")
            text = _dump(_manifest(res.inputs))
        # only inside out_dir: links there are not followed, names from the graph are single components
        written.append(write_inside(out_dir, parts, text))
    return sorted(written)
