"""Restricted APIs, as Triton's ``--http-restricted-api`` and ``--grpc-restricted-protocol`` declare them.

A rule is ``<API>[,<API>...]:<key>=<value>``: a request to one of those groups of endpoints is served
only when it carries the header (REST) or metadata (gRPC, as ``triton-grpc-protocol-<key>``) `key`
with exactly `value`. Groups are Triton's names; a group no rule names is open. The value is compared
in constant time, so the time of a refusal does not tell how much of a guess was right.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import OIPError

# Triton's groups. The endpoints of shared-memory only say that the server does not offer them; guarded all
# the same, so that a Triton command line means here what it means there. trace and logging change what the
# server traces and logs while it runs: control APIs, to restrict where clients are not trusted.
GROUPS = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)

# Triton reads a restricted gRPC key from the metadata under this prefix.
GRPC_PREFIX = "triton-grpc-protocol-"


class Restricted(OIPError, status_code=403, grpc_code="UNAVAILABLE"):
    """A restricted API called without its header, or with another value (Triton's 403, and UNAVAILABLE on gRPC)."""


@dataclass(frozen=True, slots=True)
class Restriction:
    """The header a group of endpoints asks for (`key`, as the refusal names it), and the value it must carry."""

    key: str
    value: str
    grpc: bool = False

    @property
    def header(self) -> str:
        """`key` as it arrives: HTTP/2 and ASGI servers hand header and metadata names over in lowercase."""
        return self.key.lower()

    def allows(self, presented: str | bytes | None) -> bool:
        if presented is None:
            return False
        import hmac  # by the servers that restrict an API: hmac imports hashlib, and OpenSSL's with it

        given = presented.encode("latin-1", "replace") if isinstance(presented, str) else presented
        return hmac.compare_digest(given, self.value.encode("latin-1", "replace"))

    def refusal(self) -> Restricted:
        # Triton's words: "API" on REST, "protocol" on gRPC.
        return Restricted(f"This {'protocol' if self.grpc else 'API'} is restricted, expecting header '{self.key}'")


Restrictions = Mapping[str, Restriction]
RestrictionsArgument = Iterable[str] | Mapping[str, tuple[str, str]]


def restrictions(rules: RestrictionsArgument, *, grpc: bool = False) -> dict[str, Restriction]:
    """Each group to its restriction: from Triton's rule strings, or a mapping ``{group: (key, value)}``.

    ValueError names an unknown group, a group named twice, or a rule that is not ``<API>,...:<key>=<value>``.
    On gRPC (`grpc`), the key is the metadata key Triton reads: ``triton-grpc-protocol-<key>``.
    """
    pairs: list[tuple[str, str, str]] = []
    if isinstance(rules, Mapping):
        pairs = [(group, key, value) for group, (key, value) in rules.items()]
    else:
        for rule in rules:
            apis, colon, setting = rule.partition(":")  # the value may hold ':' and '=', the groups never do
            key, equals, value = setting.partition("=")
            if not (colon and equals and apis and key):
                raise ValueError(f"{rule!r} is not <API>[,<API>...]:<key>=<value>")
            pairs += [(group.strip(), key, value) for group in apis.split(",")]
    found: dict[str, Restriction] = {}
    for group, key, value in pairs:
        if group not in GROUPS:
            raise ValueError(f"unknown restricted API {group!r}; the groups are {', '.join(GROUPS)}")
        if group in found:
            raise ValueError(f"restricted API {group!r} is named twice")
        if not key or any(character.isspace() or character in ':="' for character in key):
            raise ValueError(f"{key!r} is not a header name")
        found[group] = Restriction(GRPC_PREFIX + key if grpc else key, value, grpc)
    return found
