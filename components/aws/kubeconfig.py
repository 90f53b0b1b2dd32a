"""A kubeconfig for the cluster that authenticates with ``aws eks get-token`` (no static secrets)."""

from __future__ import annotations

import json


def kubeconfig(cluster_name: str, endpoint: str, certificate_authority: str, region: str,
               role_arn: str | None = None) -> str:
    """Kubeconfig JSON for one EKS cluster; the token is made with the caller's AWS credentials, assuming
    ``role_arn`` first when given (the deployer role, which has the cluster-admin access entry)."""
    args = ["eks", "get-token", "--cluster-name", cluster_name, "--region", region]
    if role_arn:
        args += ["--role-arn", role_arn]
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
            "args": args,
            "interactiveMode": "Never",
        }}}],
    }, indent=2)


def update_kubeconfig_command(cluster_name: str, region: str) -> str:
    """The command a person runs to reach the cluster with their own role (an admin or team access entry)."""
    return f"aws eks update-kubeconfig --region {region} --name {cluster_name} --alias {cluster_name}"
