"""AWS planes: network, compute, storage and the EKS control plane; ``build`` is the cloud's entry point.

``build`` (``components.aws.cloud``, the program with the cloud's SDK) is imported on first use, not with the
package: a reader of a saved graph that needs one of the package's light modules (``components.aws.names``,
``components.aws.figures``) loads neither the program nor the SDK."""

from __future__ import annotations

from typing import Any

__all__ = ["build"]


def __getattr__(name: str) -> Any:
    if name == "build":
        from components.aws.cloud import build

        return build
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
