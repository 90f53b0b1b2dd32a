"""What the policy family needs from a cloud (``blueprint/clouds/<cloud>/examples.py``): how each of its policies is
broken on a shipped stack, so ``blueprint policy --explain`` shows a real violation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, cast

from blueprint import clouds
from blueprint.policy.mutations import Mutation


class CloudExamples(Protocol):
    """A cloud's ``examples`` module."""

    @property
    def MUTATIONS(self) -> Mapping[str, tuple[str, Mutation, str]]:  # noqa: N802 (a module constant)
        """How each policy is broken: what was done -> (the shipped stack, the mutation, the policy that rejects
        it)."""


def cloud_examples(cloud: str) -> CloudExamples:
    """The cloud's ``examples`` module."""
    return cast(CloudExamples, clouds.part(cloud, "examples"))
