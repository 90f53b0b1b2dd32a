"""What the seed asks to see on GKE beyond the cluster (issue 27): Managed Lustre's and the checkpoint bucket's Cloud
Monitoring metrics in the platform's Prometheus, and what cannot be seen.

Choices, and why (docs/telemetry.md; sources read 2026-12-01):

- **Storage: the stackdriver exporter** (prometheus-community chart 4.13.0, exporter v0.19.0) reading Cloud Monitoring
  with Monitoring Viewer granted to its Kubernetes service account through Workload Identity Federation (no key, no
  Google service account), so the filesystem's and the bucket's figures sit beside DCGM's and Kueue's, under the same
  alerts, routes and runbooks as on AWS. Managed Lustre publishes its metrics to Cloud Monitoring on its own (GKE
  "Managed Lustre: Monitor instances and operations": automatically collected, Monitoring Viewer to read); the metric
  types under lustre.googleapis.com/ are all exported (their names were not read on Google's page, so the only alert
  on them is that none arrives). The bucket's storage.googleapis.com/api/request_count (by response_code) is a Cloud
  Storage metric collected for every bucket at no charge: no request-metrics configuration is needed, unlike S3.
- **Logs**: GKE ships container and system logs to Cloud Logging itself (loggingConfig SYSTEM_COMPONENTS, WORKLOADS and,
  in production, APISERVER; components/gcp/gke.py), which the pack's gcp-gke-logging requires; retention is the
  project's _Default bucket (30 days unless the project changes it).
- **Fabric**: GKE documents no metric for the GPUDirect NICs (TCPX, TCPXO: the NICs move into the pods' network
  namespaces while a job runs; RDMA: no GKE page names one), and the NCCL plugin exposes none: its diagnosis is NCCL's
  own log (NCCL_DEBUG=INFO, in Cloud Logging with the pod's logs). What stays visible is DCGM's NVLink counters and the
  acceptance gate's runs. The preview says so (:data:`NOT_VISIBLE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import pulumi
import pulumi_gcp as gcp

from components import provenance
from components.gcp.security import wif_principal
from components.kubernetes.objects import MONITORING_NAMESPACE

STACKDRIVER_RELEASE = "stackdriver-exporter"
STACKDRIVER_ACCOUNT = "stackdriver-exporter"
MONITORING_VIEWER = "roles/monitoring.viewer"
LUSTRE_PREFIX = "lustre.googleapis.com/"
GCS_REQUESTS = "storage.googleapis.com/api/request_count"
NOT_VISIBLE = ("GPUDirect fabric: GKE documents no metric of the GPU NICs (TCPX/TCPXO move them into the pods while "
               "a job runs) and the NCCL plugin exposes none; what is seen: DCGM's NVLink counters, NCCL's own log "
               "(NCCL_DEBUG=INFO in Cloud Logging) and the acceptance gate's per-node and all_reduce runs")


def stackdriver_values(project: str, bucket: str, lustre: bool) -> dict[str, Any]:
    """The prometheus-stackdriver-exporter chart: the project, the metric type prefixes (Managed Lustre's when the
    stack has it; the checkpoint bucket's request count, filtered to that bucket), deltas aggregated into counters
    (so ``rate()`` works on request_count), its service account (bound through Workload Identity), a ServiceMonitor."""
    prefixes = [*([LUSTRE_PREFIX] if lustre else []), GCS_REQUESTS]
    return {
        "fullnameOverride": STACKDRIVER_RELEASE,
        "stackdriver": {"projectId": project, "metrics": {
            "typePrefixes": ",".join(prefixes), "interval": "5m",
            "filters": [f'{GCS_REQUESTS}:resource.labels.bucket_name="{bucket}"'],
            "aggregateDeltas": True}},
        "serviceAccount": {"create": True, "name": STACKDRIVER_ACCOUNT},
        "serviceMonitor": {"enabled": True, "namespace": MONITORING_NAMESPACE, "interval": "60s"},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }


class GcpTelemetry(pulumi.ComponentResource):
    """Monitoring Viewer on the project for the stackdriver exporter's Kubernetes service account (Workload Identity
    Federation principal), after the cluster whose pool names it.

    Attributes:
        grants: the IAM member (its release waits for it).
    """

    grants: list[pulumi.Resource]

    def __init__(self, name: str, *, project: str, project_number: pulumi.Output[str], cluster: pulumi.Resource,
                 after: Sequence[pulumi.Resource] = (), opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:telemetry:GcpTelemetry", name, provenance.props(), opts)
        member = gcp.projects.IAMMember(
            f"{name}-metrics-reader", project=project, role=MONITORING_VIEWER,
            member=wif_principal(project_number, project, MONITORING_NAMESPACE, STACKDRIVER_ACCOUNT),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster, *after]))
        self.grants = [member]
        self.register_outputs({})
