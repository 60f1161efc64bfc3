"""Which network addresses the portal may call for a user: public ones only.

`ipaddress`'s `is_global` judges an IPv6 address by its own prefix, so an IPv6
form that carries an IPv4 address passes as global while the packets go to the
IPv4 address inside it, loopback or private included: IPv4-mapped
(::ffff:127.0.0.1), 6to4 (2002:7f00:1::), Teredo, and NAT64 (64:ff9b::7f00:1,
which a NAT64 gateway forwards to 127.0.0.1 of its own network).
"""

from ipaddress import IPv4Address, IPv6Address, ip_network

# RFC 6052's well-known NAT64 prefix: the last 32 bits are the IPv4 address.
NAT64_WELL_KNOWN = ip_network("64:ff9b::/96")
# Neither has a public use: RFC 8215's local-use NAT64 prefix (the IPv4 address
# sits where the gateway's prefix length says) and RFC 4291's deprecated
# IPv4-compatible addresses (::127.0.0.1).
NEVER_PUBLIC = (ip_network("64:ff9b:1::/48"), ip_network("::/96"))


def embedded_ipv4(ip: IPv6Address) -> list[IPv4Address]:
    """The IPv4 addresses that packets to `ip` may reach (mapped, 6to4, Teredo, NAT64)."""
    found = [v4 for v4 in (ip.ipv4_mapped, ip.sixtofour) if v4 is not None]
    if ip.teredo is not None:
        found.extend(ip.teredo)
    if ip in NAT64_WELL_KNOWN:
        found.append(IPv4Address(int(ip) & 0xFFFF_FFFF))
    return found


def is_public(ip: IPv4Address | IPv6Address) -> bool:
    """Whether every host that traffic to `ip` can reach is a public one."""
    if not ip.is_global or ip.is_multicast:
        return False
    if isinstance(ip, IPv4Address):
        return True
    if any(ip in network for network in NEVER_PUBLIC):
        return False
    return all(is_public(v4) for v4 in embedded_ipv4(ip))
