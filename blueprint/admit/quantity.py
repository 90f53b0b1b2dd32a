"""Kubernetes resource quantities (``500m``, ``16Gi``, ``1e3``) as exact fractions, and back to text.

The grammar is the API server's (k8s.io/apimachinery ``resource.Quantity``): a signed decimal number followed by
a binary suffix (Ki..Ei), a decimal suffix (n, u, m, k, M, G, T, P, E) or an exponent (``e3``). Requests are
compared exactly, as the scheduler and the quota controllers do, so fractions are used rather than floats.
"""

from __future__ import annotations

import re
from decimal import Decimal, localcontext
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_PATTERN = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))((?:[KMGTPE]i)|[numkMGTPE]?|[eE][+-]?[0-9]{1,3})$")
INT64_MAX = 2**63 - 1
# Resources measured in bytes: shown in binary units.
_BYTES = ("memory", "ephemeral-storage", "storage")


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Fraction:
    """The exact amount of a quantity given as text (``"16Gi"``) or a JSON number (``32``)."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    match = _PATTERN.match(value.strip())
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity (a number with an optional suffix such as m, Gi or k)")
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return number * Fraction(10) ** int(suffix[1:])
    return number * _DECIMAL[suffix]


def is_byte_resource(resource: str) -> bool:
    """Whether a resource is counted in bytes (memory, storage, hugepages)."""
    return resource in _BYTES or resource.startswith("hugepages-")


def show(resource: str, amount: Fraction) -> str:
    """An amount as a person reads it: bytes in the largest binary unit that keeps it whole (or Gi to two
    decimals), CPU in cores (or millicores below one core), counts as integers; an amount beyond what any node
    reports (above 2^63 - 1, the int64 the scheduler and the kubelet count in) in scientific notation, as its digits
    would fill the message."""
    if amount > INT64_MAX:
        with localcontext() as ctx:
            ctx.prec = 3
            return f"{Decimal(amount.numerator) / Decimal(amount.denominator):.2e}"
    if is_byte_resource(resource):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= size and (amount / size).denominator == 1:
                return f"{amount / size}{unit}"
        if amount >= 2**30:
            return f"{float(amount / 2**30):.2f}Gi"
        return f"{float(amount / 2**20):.1f}Mi" if amount >= 2**20 else f"{int(amount)}"
    if amount.denominator == 1:
        return str(int(amount))
    if resource == "cpu" and amount < 1 and (amount * 1000).denominator == 1:
        return f"{int(amount * 1000)}m"
    return f"{float(amount):.2f}".rstrip("0").rstrip(".")
