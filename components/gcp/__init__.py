"""The GCP (GKE) planes: ``build(spec)`` returns what the cloud-neutral wiring needs."""

from components.gcp.cloud import build

__all__ = ["build"]
