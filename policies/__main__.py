"""Entry point of the policy pack for `pulumi preview --policy-pack policies`."""
from gpu_policies.pack import serve

serve()
