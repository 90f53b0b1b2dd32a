"""The Kubernetes platform on the cluster: GPU stack, queues, tenancy and telemetry (cloud-neutral)."""
