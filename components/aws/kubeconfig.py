"""A kubeconfig for the cluster that authenticates with ``aws eks get-token`` (no static secrets)."""

from __future__ import annotations

import json


def kubeconfig(cluster_name: str, endpoint: str, certificate_authority: str, region: str) -> str:
    """Kubeconfig JSON for one EKS cluster, using the caller's AWS credentials at run time."""
    user = f"{cluster_name}-aws"
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {
            "server": endpoint, "certificate-authority-data": certificate_authority}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": cluster_name,
        "users": [{"name": user, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region],
            "interactiveMode": "Never",
        }}}],
    }, indent=2)
