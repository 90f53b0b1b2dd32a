"""The GCP (GKE) planes: ``build(spec)`` returns what the cloud-neutral wiring needs.

``build`` (``components.gcp.cloud``, the program with the cloud's SDK) is imported on first use, not with the
package: a reader of a saved graph that needs one of the package's light modules (``components.gcp.figures``) loads
neither the program nor the SDK."""

from __future__ import annotations

from typing import Any

__all__ = ["build"]


def __getattr__(name: str) -> Any:
    if name == "build":
        from components.gcp.cloud import build

        return build
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
