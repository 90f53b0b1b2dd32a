"""Acceptance: the NCCL benchmark's logs and records, and the checks of an account or project before and after
``pulumi up`` (preflight, audit), whose cloud-specific halves live in :mod:`blueprint.clouds`."""
