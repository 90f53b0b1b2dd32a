"""Names the AWS program writes and the readers of a saved graph look for (``blueprint admit``, the report): in a
module that imports nothing, so that reading a graph loads neither the program nor the cloud SDKs."""

from __future__ import annotations

# The opt-in tag: only Auto Scaling groups carrying it (value "true") are discovered and may be scaled.
AUTOSCALE_TAG = "gpu-cluster/autoscale"
# Where CA reads a scale-from-zero node's labels, taints and resources (ASG tags).
NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
# The Helm release of the Cluster Autoscaler (components/aws/autoscaler.py).
AUTOSCALER_RELEASE = "cluster-autoscaler"
