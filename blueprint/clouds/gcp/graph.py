"""Google Cloud in the graph family: input limits of graph documents (int64 fields come as decimal strings), and the
offline engine's answers for GCP resources and invokes, in the provider's formats (``projects/<p>/...`` ids, self
links, service account emails, addresses from the documentation ranges)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from blueprint.graph.cloud import MAX_GIB, MAX_NODES, Quantities, Refusal, stable_id
from blueprint.graph.model import SECRET, UNKNOWN

OFFLINE_GCP_PROJECT = "offline-project"
OFFLINE_GCP_PROJECT_NUMBER = "123456789012"
_NODES = ("a node count", MAX_NODES)
_GIB = ("a capacity in GiB", MAX_GIB)
QUANTITIES: Quantities = {
    "gcp:container/nodePool:NodePool": ((("nodeCount",), _NODES), (("initialNodeCount",), _NODES),
                                        *((("autoscaling", key), _NODES) for key in (
                                            "minNodeCount", "maxNodeCount", "totalMinNodeCount",
                                            "totalMaxNodeCount"))),
    "gcp:lustre/instance:Instance": ((("capacityGib",), _GIB),
                                     (("perUnitStorageThroughput",), ("a throughput in MB/s per TiB", 100_000))),
    "gcp:parallelstore/instance:Instance": ((("capacityGib",), _GIB),),
}
NUMERIC_STRINGS = True  # the GCP provider sends int64 fields as decimal strings
BUDGET = "gcp:billing/budget:Budget"
INT64 = re.compile(r"-?[0-9]{1,19}")
MAX_NANOS = 999_999_999


def refused_values(typ: str, inputs: Mapping[str, Any]) -> list[Refusal]:
    """A billing budget's specified amount that is not a google.type.Money (units a decimal int64, nanos within
    +-999,999,999 of the units' sign; pulumi_gcp billing.Budget's docstring) or is below zero: a budget of a negative
    amount has every threshold crossed from its first cent, so it is never the limit its owner meant."""
    amount = inputs.get("amount") if typ == BUDGET else None
    money = amount.get("specifiedAmount") if isinstance(amount, dict) else None
    if not isinstance(money, dict):
        return []
    units, nanos = money.get("units", "0"), money.get("nanos", 0)
    if units in (UNKNOWN, SECRET) or nanos in (UNKNOWN, SECRET):
        return []
    where = ("amount", "specifiedAmount")
    rule, source = "budget-amount-valid", "(google.type.Money, pulumi_gcp billing.Budget amount.specifiedAmount)"
    if not isinstance(units, str) or not INT64.fullmatch(units):
        return [((*where, "units"), f"{json.dumps(units)[:60]} is not a whole number of currency units as a decimal "
                 f"string {source}", rule)]
    if isinstance(nanos, float) and nanos.is_integer():
        nanos = int(nanos)
    if isinstance(nanos, bool) or not isinstance(nanos, int) or abs(nanos) > MAX_NANOS \
            or (int(units) > 0 and nanos < 0) or (int(units) < 0 and nanos > 0):
        return [((*where, "nanos"), f"{json.dumps(nanos)[:60]} is not nanos of {units} units (a whole number from "
                 f"-{MAX_NANOS:,} to {MAX_NANOS:,}, of the units' sign) {source}", rule)]
    if int(units) < 0 or nanos < 0:
        return [((*where, "units" if int(units) < 0 else "nanos"), f"a budget of {units} units and {nanos} nanos is "
                 "below zero: every threshold is crossed from the first cent, so it limits nothing; give the "
                 "amount the budget allows", rule)]
    return []


def new_resource(typ: str, name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    """Id and computed outputs of a GCP resource."""
    state: dict[str, Any] = dict(inputs)
    project = str(inputs.get("project") or OFFLINE_GCP_PROJECT)
    physical = str(inputs.get("name") or inputs.get("instanceId") or inputs.get("accountId") or name)
    octet = int(stable_id("ip", typ, name, length=2), 16)
    rid = stable_id(typ, name)
    base = "https://www.googleapis.com/compute/v1"
    if typ == "gcp:compute/network:Network":
        rid = f"projects/{project}/global/networks/{physical}"
        state.update(name=physical, selfLink=f"{base}/{rid}")
    elif typ == "gcp:compute/subnetwork:Subnetwork":
        rid = f"projects/{project}/regions/{inputs.get('region', region)}/subnetworks/{physical}"
        state.update(name=physical, selfLink=f"{base}/{rid}")
    elif typ == "gcp:compute/globalAddress:GlobalAddress":
        state.update(name=physical, address=f"10.{200 + octet % 50}.0.0")
    elif typ == "gcp:container/cluster:Cluster":
        rid = f"projects/{project}/locations/{inputs.get('location', region)}/clusters/{physical}"
        endpoints = inputs.get("controlPlaneEndpointsConfig", {})
        dns = {**endpoints.get("dnsEndpointConfig", {}),
               "endpoint": f"gke-{stable_id('dns', name, length=32)}.{inputs.get('location', region)}.gke.goog"}
        state.update(name=physical, endpoint=f"172.16.{octet}.2",
                     masterAuth={**inputs.get("masterAuth", {}), "clusterCaCertificate": "T0ZGTElORS1DQQ=="},
                     controlPlaneEndpointsConfig={**endpoints, "dnsEndpointConfig": dns})
    elif typ == "gcp:container/nodePool:NodePool":
        state.update(name=physical)
    elif typ == "gcp:storage/bucket:Bucket":
        rid = physical
        state.update(name=physical, url=f"gs://{physical}")
    elif typ == "gcp:kms/keyRing:KeyRing":
        rid = f"projects/{project}/locations/{inputs.get('location', region)}/keyRings/{physical}"
    elif typ == "gcp:kms/cryptoKey:CryptoKey":
        rid = f"{inputs.get('keyRing', '')}/cryptoKeys/{physical}"
    elif typ == "gcp:serviceaccount/account:Account":
        email = f"{physical}@{project}.iam.gserviceaccount.com"
        rid = f"projects/{project}/serviceAccounts/{email}"
        state.update(email=email, name=rid, member=f"serviceAccount:{email}")
    elif typ == "gcp:lustre/instance:Instance":
        state["mountPoint"] = f"10.{200 + octet % 50}.0.2@tcp:/{inputs.get('filesystem', 'lustrefs')}"
    elif typ == "gcp:filestore/instance:Instance":
        state["networks"] = [{**n, "ipAddresses": [f"10.{200 + octet % 50}.0.2"]} for n in inputs.get("networks", [])]
    elif typ == "gcp:parallelstore/instance:Instance":
        state["accessPoints"] = [f"10.{200 + octet % 50}.0.{i}" for i in (2, 3, 4)]
    elif typ == "gcp:monitoring/notificationChannel:NotificationChannel":
        rid = f"projects/{project}/notificationChannels/{int(stable_id('channel', name, length=12), 16)}"
        state["name"] = rid
    elif typ == "gcp:sql/databaseInstance:DatabaseInstance":
        # A private IP from the private services access range (the instance has no public one).
        rid = physical
        state.update(name=physical, privateIpAddress=f"10.{200 + octet % 50}.0.3",
                     connectionName=f"{project}:{inputs.get('region', region)}:{physical}")
    elif typ == "gcp:projects/serviceIdentity:ServiceIdentity":
        agent = {"container.googleapis.com": "container-engine-robot",
                 "sqladmin.googleapis.com": "gcp-sa-cloud-sql"}.get(str(inputs.get("service")), "gcp-sa")
        email = f"service-{OFFLINE_GCP_PROJECT_NUMBER}@{agent}.iam.gserviceaccount.com"
        state.update(email=email, member=f"serviceAccount:{email}")
    elif typ == "gcp:storage/managedFolder:ManagedFolder":
        state["name"] = physical
    return rid, state


def call(token: str, args: Mapping[str, Any], region: str) -> dict[str, Any] | None:
    """The offline project, its number and its Cloud Storage service agent."""
    if token == "gcp:organizations/getProject:getProject":
        project = str(args.get("projectId") or OFFLINE_GCP_PROJECT)
        return {"number": OFFLINE_GCP_PROJECT_NUMBER, "projectId": project, "name": project}
    if token == "gcp:storage/getProjectServiceAccount:getProjectServiceAccount":
        return {"emailAddress": f"service-{OFFLINE_GCP_PROJECT_NUMBER}@gs-project-accounts.iam.gserviceaccount.com",
                "project": args.get("project", OFFLINE_GCP_PROJECT)}
    return None


def phase_boundaries(spec: Any) -> list[datetime]:
    """None: the GCP program compares no window with the clock (its spec's support dates change by the day, which the
    cache key holds)."""
    return []
