"""Capacity Block timing: where a block's window stands now, and what scales its node group.

A Capacity Block holds a fixed number of instances between two UTC times and is paid whether nodes run
or not. Facts (EKS user guide, capacity-blocks-mng and ml-node-groups; EC2 user guide, Capacity Blocks;
read 2026-11-29):

- no instance launches before the block starts, so the node group is created with size 0 and scaled up
  when the block begins: "create a scheduled scaling policy for the ASG that aligns to the Capacity
  Block reservation start time" (the first of the three ways EKS lists; terraform-aws-eks's
  ``schedules`` do the same with ``aws_autoscaling_schedule`` on the node group's Auto Scaling group);
- EC2 starts shutting instances down 30 minutes before the block ends; for a managed node group EKS
  itself adds a scheduled action that scales it to 0 40 minutes before the end ("Amazon EKS Node Group
  Capacity Scaledown Before Reservation End", not to be edited or deleted);
- an upgrade of such a node group needs desiredSize 0.

Auto Scaling refuses a scheduled action whose start time is in the past, and deletes a one-time action
once it has run, so the program declares the scale-up action only while the block is in the future.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

EC2_SHUTDOWN_LEAD = timedelta(minutes=30)
EKS_SCALEDOWN_LEAD = timedelta(minutes=40)

Phase = Literal["future", "active", "ending", "ended"]


@dataclass(frozen=True)
class BlockWindow:
    """A Capacity Block's window compared with a moment."""

    start: datetime
    end: datetime
    instance_count: int
    now: datetime

    @property
    def phase(self) -> Phase:
        """future: not started; active: nodes may run; ending: EC2 is reclaiming the instances; ended."""
        if self.now < self.start:
            return "future"
        if self.now < self.end - EC2_SHUTDOWN_LEAD:
            return "active"
        if self.now < self.end:
            return "ending"
        return "ended"

    @property
    def running(self) -> bool:
        """Whether the block's nodes may be running now (active, or ending while EC2 reclaims them): a roll of the
        group would terminate them."""
        return self.phase in ("active", "ending")

    @property
    def hours(self) -> float:
        """Length of the block in hours (what is paid, at the instance count)."""
        return (self.end - self.start).total_seconds() / 3600

    @property
    def scale_to_zero_by(self) -> datetime:
        """The latest time the group must be at 0: EC2 starts reclaiming instances then."""
        return self.end - EC2_SHUTDOWN_LEAD

    @property
    def eks_scaledown_at(self) -> datetime:
        """When EKS's own scheduled action scales the managed node group to 0."""
        return self.end - EKS_SCALEDOWN_LEAD

    @property
    def schedule_scale_up(self) -> bool:
        """Whether the program declares the scale-up action (only before the block starts)."""
        return self.phase == "future"


def utc_text(moment: datetime) -> str:
    """``YYYY-MM-DDThh:mm:ssZ``, the form Auto Scaling schedules and the spec use."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
