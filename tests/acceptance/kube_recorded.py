"""A recorded Kubernetes API for the audit's in-cluster checks: the real Kubernetes Python client (kubeconfig loading,
request building, JSON decoding into ``V1Secret``, ``ApiException`` on an error status) talking to answers kept under
``tests/fixtures/kubernetes_api/`` instead of a cluster. urllib3's pool manager, which the client sends every request
through (kubernetes 36.0.3 kubernetes/client/rest.py ``RESTClientObject``), is replaced by one that answers from the
recording and sends nothing.

A Secret no file records answers 404 (the recorded NotFound Status); tests break one answer at a time with
:meth:`RecordedKube.drop`, :meth:`RecordedKube.edit`, :meth:`RecordedKube.forbid` and :meth:`RecordedKube.unreachable`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import urllib3
import yaml

from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "kubernetes_api"
SERVER = "https://A1B2C3D4E5F6.gr7.us-east-1.eks.amazonaws.com"  # never contacted


def kubeconfig(path: Path, contexts: dict[str, str], current: str | None = None) -> Path:
    """A kubeconfig with one cluster entry, user and context per ``{context name: cluster entry name}``, all pointing
    at the recorded server, as the clouds' CLIs write them (a token user stands in for their exec plugins)."""
    doc = {"apiVersion": "v1", "kind": "Config", "preferences": {},
           "clusters": [{"name": cluster, "cluster": {"server": SERVER, "certificate-authority-data":
                                                      "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="}}
                        for cluster in sorted(set(contexts.values()))],
           "users": [{"name": ctx, "user": {"token": "not-a-real-token"}} for ctx in contexts],
           "contexts": [{"name": ctx, "context": {"cluster": cluster, "user": ctx}}
                        for ctx, cluster in contexts.items()],
           "current-context": current or next(iter(contexts), "")}
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


class _Answer:
    """What urllib3 hands the client: status, reason, body, headers."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.reason = {200: "OK", 403: "Forbidden", 404: "Not Found"}.get(status, "Error")
        self.data = json.dumps(body).encode()
        self.headers = {"Content-Type": "application/json"}

    def getheaders(self) -> dict[str, str]:
        return self.headers

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name, default)


class RecordedKube:
    """The recorded API server; :meth:`install` puts it under the client for one test."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, dict[str, Any]]] = {}
        for p in sorted(FIXTURES.glob("secret-*.json")):
            doc = json.loads(p.read_text(encoding="utf-8"))
            self.answers[doc["request"]["path"]] = (doc["status"], doc["response"])
        self._not_found = json.loads((FIXTURES / "status-404-secret-not-found.json").read_text(encoding="utf-8"))
        self._forbidden = json.loads((FIXTURES / "status-403-secret-forbidden.json").read_text(encoding="utf-8"))
        self.requests: list[tuple[str, str]] = []
        self.down = False

    @staticmethod
    def path(namespace: str, name: str) -> str:
        return f"/api/v1/namespaces/{namespace}/secrets/{name}"

    def drop(self, namespace: str, name: str) -> RecordedKube:
        del self.answers[self.path(namespace, name)]
        return self

    def edit(self, namespace: str, name: str, change: Callable[[dict[str, Any]], Any]) -> RecordedKube:
        status, body = self.answers[self.path(namespace, name)]
        body = copy.deepcopy(body)
        change(body)
        self.answers[self.path(namespace, name)] = (status, body)
        return self

    def forbid(self, namespace: str, name: str) -> RecordedKube:
        self.answers[self.path(namespace, name)] = (403, self._status(self._forbidden, namespace, name))
        return self

    def unreachable(self) -> RecordedKube:
        self.down = True
        return self

    @staticmethod
    def _status(doc: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
        text = json.dumps(doc["response"]).replace("{namespace}", namespace).replace("{name}", name)
        return dict(json.loads(text))

    def request(self, method: str, url: str, **_: Any) -> _Answer:
        parts = urlsplit(url)
        assert f"{parts.scheme}://{parts.netloc}" == SERVER, url
        self.requests.append((method, parts.path))
        if self.down:
            raise urllib3.exceptions.MaxRetryError(None, url, urllib3.exceptions.NewConnectionError(
                None, "Failed to establish a new connection: [Errno 111] Connection refused"))  # type: ignore[arg-type]
        if parts.path in self.answers:
            return _Answer(*self.answers[parts.path])
        *_, namespace, _secrets, name = parts.path.split("/")
        return _Answer(404, self._status(self._not_found, namespace, name))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> RecordedKube:
        recorded = self

        class Pool:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                pass

            def request(self, method: str, url: str, **kwargs: Any) -> _Answer:
                return recorded.request(method, url, **kwargs)

        monkeypatch.setattr(urllib3, "PoolManager", Pool)
        monkeypatch.setattr(urllib3, "ProxyManager", Pool)
        return self
