"""The deployer's least privilege: the IAM policy (AWS) or custom role (GCP) that ``pulumi up`` needs for exactly the
resource types and invokes of a stack's graph, from each cloud's table of permissions (``deployer_permissions.yaml``,
with its sources) and the table of types no cloud authorises (``no_cloud_permissions.yaml``)."""
