"""What the policy family needs from a cloud (``blueprint/clouds/<cloud>/examples.py``): how each of its policies is
broken on a shipped stack, so ``blueprint policy --explain`` shows a real violation; which stack-file key sets its
resources' fields, so SARIF points at the line to change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, cast

from blueprint import clouds
from blueprint.policy.mutations import Mutation

if TYPE_CHECKING:
    from blueprint.policy.spec_keys import KeyRule


class CloudExamples(Protocol):
    """A cloud's ``examples`` module."""

    @property
    def MUTATIONS(self) -> Mapping[str, tuple[str, Mutation, str]]:  # noqa: N802 (a module constant)
        """How each policy is broken: what was done -> (the shipped stack, the mutation, the policy that rejects
        it)."""

    @property
    def SPEC_KEYS(self) -> Sequence[KeyRule]:  # noqa: N802 (a module constant)
        """The stack-file key each of the cloud's findings is about (:mod:`blueprint.policy.spec_keys`)."""


def cloud_examples(cloud: str) -> CloudExamples:
    """The cloud's ``examples`` module."""
    return cast(CloudExamples, clouds.part(cloud, "examples"))
