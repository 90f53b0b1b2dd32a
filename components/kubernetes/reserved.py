"""What the kubelet keeps of a node for the system, and so what a node offers pods (and Slurm's jobs): one formula for
the program (Slurm's ``DefMemPerGPU``, objects/slurm.py) and ``blueprint admit`` (blueprint/admit/nodes.py).

Assumption, on both clouds: GKE's published reservation tiers (cloud.google.com/kubernetes-engine/docs/concepts/
plan-node-sizes, "Memory and CPU reservations": CPU 6 % of the first core, 1 % of the second, 0.5 % of the next two,
0.25 % above four; memory 255 MiB below 1 GiB, else 25 % of the first 4 GiB, 20 % of the next 4, 10 % of the next
8, 6 % of the next 112, 2 % above 128 GiB) plus the 100 MiB hard eviction threshold. They reserve more than EKS's
AL2023 formula on large nodes (awslabs/amazon-eks-ami nodeadm: 255 MiB + 11 MiB per pod), so what fits here fits
there. Pure arithmetic on :class:`~fractions.Fraction`: no import beyond the standard library.
"""

from __future__ import annotations

from fractions import Fraction

GIB = 2**30
MIB = 2**20
EVICTION_HARD = 100 * MIB


def reserved_cpu(cores: Fraction) -> Fraction:
    """CPU the kubelet keeps for the system (module docstring)."""
    tiers = ((Fraction(1), Fraction(6, 100)), (Fraction(1), Fraction(1, 100)), (Fraction(2), Fraction(5, 1000)))
    left, out = cores, Fraction(0)
    for size, rate in tiers:
        take = min(left, size)
        out += take * rate
        left -= take
    return out + max(left, Fraction(0)) * Fraction(25, 10000)


def reserved_memory(total: Fraction) -> Fraction:
    """Memory (bytes) the kubelet keeps for the system and eviction (module docstring)."""
    if total < GIB:
        return Fraction(255 * MIB) + EVICTION_HARD
    tiers = ((4 * GIB, Fraction(25, 100)), (4 * GIB, Fraction(20, 100)), (8 * GIB, Fraction(10, 100)),
             (112 * GIB, Fraction(6, 100)))
    left, out = total, Fraction(0)
    for size, rate in tiers:
        take = min(left, Fraction(size))
        out += take * rate
        left -= take
    return out + max(left, Fraction(0)) * Fraction(2, 100) + EVICTION_HARD


def allocatable_memory(memory_gib: int, hugepages_gib: int = 0) -> Fraction:
    """Bytes of memory a node of ``memory_gib`` offers its pods: its memory less the kubelet's reservation and the 2 MiB
    hugepages it reserves at boot (Kubernetes "Manage HugePages": they leave the memory the node offers)."""
    total = Fraction(memory_gib * GIB)
    return max(Fraction(0), total - reserved_memory(total) - hugepages_gib * GIB)


def allocatable_cpu(vcpus: int) -> Fraction:
    """CPUs a node of ``vcpus`` offers its pods."""
    return Fraction(vcpus) - reserved_cpu(Fraction(vcpus))
