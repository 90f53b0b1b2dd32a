"""AWS planes: network, compute, storage and the EKS control plane; ``build`` is the cloud's entry point."""

from components.aws.cloud import build

__all__ = ["build"]
