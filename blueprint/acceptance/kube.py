"""The stack's cluster as ``blueprint audit`` reads it: the Kubernetes Python client on the user's kubeconfig
(``$KUBECONFIG``, else ``~/.kube/config``), read only.

Which context: ``--kube-context`` when given; else the one whose name, or whose cluster entry's name, is one the
cloud's CLI writes for this stack's cluster (:class:`KubeCluster`, from the cloud's ``checks`` module), the current
context first when several are. A kubeconfig with no such context is not read at all: checking another cluster's
Secrets would report on the wrong cluster.

Everything that keeps the cluster from being read (no kubeconfig, no context for the cluster, credentials refused,
RBAC that forbids reading Secrets, an API server that does not answer) is a :class:`ClusterAccessError` with the
reason and the fix, which the checks report as cannot-check, never as a pass. Secret values are never printed or
kept: a read returns the Secret's keys and whether each is empty.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

READ_TIMEOUT_S = 10  # per request; with one retry, an API server that does not answer costs about 20 s


@dataclass(frozen=True)
class KubeCluster:
    """How the cloud's CLI names the stack's cluster in a kubeconfig: ``patterns`` are regular expressions a context's
    name or its cluster entry's name matches in full; ``credentials`` is the command that writes the entry."""

    name: str
    patterns: tuple[str, ...]
    credentials: str

    def matches(self, context: Mapping[str, Any]) -> bool:
        """Whether a kubeconfig context (``{"name": ..., "context": {"cluster": ...}}``) is this cluster's."""
        names = [str(context.get("name", "")), str((context.get("context") or {}).get("cluster", ""))]
        return any(re.fullmatch(p, n) for p in self.patterns for n in names)


class ClusterAccessError(Exception):
    """The cluster cannot be read; the message says why and what to do."""


SecretKeys = dict[str, bool]  # a Secret's data keys, each True when its value is empty
SecretReader = Callable[[str, str], SecretKeys | None]  # (namespace, name) -> its keys, or None when it does not exist


def kubeconfig_path() -> str:
    """Where the client looks: ``$KUBECONFIG`` (a list joined by the OS's path separator), else ``~/.kube/config``
    (read when called: the client reads the variable once, at import)."""
    return os.environ.get("KUBECONFIG") or "~/.kube/config"


def pick_context(contexts: Sequence[Mapping[str, Any]], current: Mapping[str, Any] | None, cluster: KubeCluster,
                 wanted: str | None) -> str:
    """The context to read the cluster through (see the module's docstring)."""
    names = [str(c.get("name")) for c in contexts]
    if wanted is not None:
        if wanted not in names:
            raise ClusterAccessError(f"--kube-context {wanted} is not in the kubeconfig ({kubeconfig_path()}; "
                                     f"contexts: {', '.join(names) or 'none'})")
        return wanted
    mine = [c for c in contexts if cluster.matches(c)]
    if not mine:
        raise ClusterAccessError(
            f"no context of the kubeconfig ({kubeconfig_path()}) is cluster {cluster.name}'s (contexts: "
            f"{', '.join(names) or 'none'}); write one with `{cluster.credentials}`, or name one with --kube-context")
    if current is not None and any(c.get("name") == current.get("name") for c in mine):
        return str(current.get("name"))
    return str(mine[0].get("name"))


def secret_reader(cluster: KubeCluster, context: str | None = None) -> SecretReader:
    """A reader of the cluster's Secrets through the Kubernetes client, on the context :func:`pick_context` picks."""
    import urllib3
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    path = kubeconfig_path()
    try:
        contexts, current = config.list_kube_config_contexts(config_file=path)
    except ConfigException as err:
        raise ClusterAccessError(f"no kubeconfig ({path}: {err}); write one with `{cluster.credentials}`") from None
    chosen = pick_context(contexts or [], current, cluster, context)
    settings = client.Configuration()
    try:
        config.load_kube_config(config_file=path, context=chosen, client_configuration=settings,
                                persist_config=False)
    except (ConfigException, OSError, ValueError) as err:
        raise ClusterAccessError(f"context {chosen} of {path} cannot be used: {err}") from None
    settings.retries = 1
    core = client.CoreV1Api(client.ApiClient(settings))

    def read(namespace: str, name: str) -> SecretKeys | None:
        try:
            secret = core.read_namespaced_secret(name, namespace, _request_timeout=READ_TIMEOUT_S)
        except ApiException as err:
            if err.status == 404:
                return None
            raise ClusterAccessError(_refused(err.status, str(err.reason), namespace, chosen)) from None
        except urllib3.exceptions.HTTPError as err:
            raise ClusterAccessError(f"the API server of context {chosen} ({settings.host}) does not answer: "
                                     f"{type(err).__name__}") from None
        return {key: not value for key, value in (secret.data or {}).items()}
    return read


def _refused(status: int, reason: str, namespace: str, context: str) -> str:
    if status == 0:  # the client's own: a TLS failure, or a request it could not make
        return f"the API server of context {context} cannot be reached: {reason.strip()}"
    if status == 401:
        return (f"401 Unauthorized: the API server refuses the credentials of context {context} (expired, or the "
                "cloud CLI the kubeconfig runs for a token is missing or not logged in)")
    if status == 403:
        return (f"403 Forbidden: context {context}'s user may not get Secrets in {namespace}; audit as a platform "
                f"admin, or grant get on secrets in {namespace}")
    return f"{status} {reason} from the API server of context {context}"
