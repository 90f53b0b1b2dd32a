"""What a policy run produces and is configured with: the enforcement levels, the loaded pack, a violation and the
report. Both engines (:mod:`blueprint.policy.direct`, :mod:`blueprint.policy.analyzer`) and the runner that chooses
between them (:mod:`blueprint.policy.runner`, which re-exports these names) import them from here, so no engine imports
the runner back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The analyzer's enforcement levels (pulumi/proto/analyzer.proto, enum EnforcementLevel: ADVISORY = 0,
# MANDATORY = 1, DISABLED = 2, REMEDIATE = 3), written out so that reading a report needs no protobuf;
# tests/policy/test_engines.py checks them against the generated module.
LEVELS: dict[str, int] = {"advisory": 0, "mandatory": 1, "remediate": 3, "disabled": 2}
LEVEL_NAMES = {v: k for k, v in LEVELS.items()}
# The version the in-process analyzer is built with: it appears only in the message of a policy that could not run
# because an input is unknown during preview ("... from policy pack 'gpu-cluster-policies@v0.1.0' ...").
PACK_VERSION = "0.1.0"

LevelConfig = dict[str, tuple[int, dict[str, Any]]]


@dataclass(frozen=True)
class Violation:
    """One reported violation, in the JSON output's shape: ``message`` is the requirement (the policy description,
    a line break, the violation text), ``field`` the path in the resource's inputs that violates ("" when the pack
    names none), ``value`` what is there (None when not given: the field is missing), ``fix`` the rule's
    remediation."""

    policy: str
    enforcement: str
    severity: str
    urn: str
    type: str
    message: str
    field: str = ""
    value: Any = None
    fix: str = ""


@dataclass
class PolicyReport:
    """Everything one run of the pack found."""

    pack: str
    violations: list[Violation] = field(default_factory=list)
    not_applicable: list[tuple[str, str]] = field(default_factory=list)
    rules: list[Any] = field(default_factory=list)
    levels: dict[str, str] = field(default_factory=dict)  # each policy's configured enforcement level

    @property
    def mandatory(self) -> list[Violation]:
        """Violations that block a deployment."""
        return [v for v in self.violations if v.enforcement == "mandatory"]

    @property
    def passed(self) -> bool:
        """True when no mandatory policy is violated."""
        return not self.mandatory


@dataclass(frozen=True)
class Pack:
    """The loaded pack: its name, policy objects, documentation rows and the decoder of its violation messages
    (``gpu_policies.common.decode_finding``: message, field, value)."""

    name: str
    policies: list[Any]
    rules: list[Any]
    decode: Callable[[str], tuple[str, str | None, Any]]
    absent: Any  # the value decode gives when none was reported
