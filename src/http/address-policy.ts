import { BlockList, isIP, type LookupFunction } from 'node:net';
import dns from 'node:dns';

/**
 * Addresses an app may not make the daemon reach (a fetch on an app's behalf is a port scanner
 * and a content oracle for the machine and its network otherwise): loopback, link-local,
 * private (RFC 1918, IPv6 ULA, CGNAT 100.64/10), unspecified, multicast and reserved ranges.
 * IPv4 inside IPv6 (mapped, NAT64, 6to4) is judged by its IPv4 address.
 */
const nonPublic = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local (and cloud metadata)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  nonPublic.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128],
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['fc00::', 7], // unique local
  ['ff00::', 8], // multicast
  ['100::', 64], // discard
] as const) {
  nonPublic.addSubnet(net, prefix, 'ipv6');
}

/** The 16 bytes of an IPv6 address (a dotted IPv4 tail, as in ::ffff:127.0.0.1, included). */
export function ipv6Bytes(address: string): number[] | null {
  let text = address.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1].split('.').map(Number);
    text = `${text.slice(0, -dotted[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = text.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  if (groups.length !== 8) return null;
  return groups.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
}

/** The IPv4 address an IPv6 address carries (mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16), if any. */
function embeddedIpv4(address: string): string | null {
  const b = ipv6Bytes(address);
  if (!b) return null;
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return b.slice(12).join('.');
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return b.slice(12).join('.');
  if (b[0] === 0x20 && b[1] === 0x02) return b.slice(2, 6).join('.');
  if (zeros(0, 12)) return b.slice(12).join('.'); // IPv4-compatible ::a.b.c.d (deprecated)
  return null;
}

export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !nonPublic.check(address, 'ipv4');
  if (family === 6) {
    const bare = address.replace(/%.*$/, '');
    if (nonPublic.check(bare, 'ipv6')) return false;
    const v4 = embeddedIpv4(bare);
    return v4 === null || !nonPublic.check(v4, 'ipv4');
  }
  return false;
}

/** Networks (CIDR or single addresses) allowed although not public, e.g. a model mirror on the LAN. */
export function parseNetworks(list: string[]): BlockList {
  const allowed = new BlockList();
  for (const item of list) {
    const [net, bits] = item.split('/');
    const family = isIP(net);
    if (!family) throw new Error(`"${item}" is not an IP address or CIDR network`);
    const prefix = bits === undefined ? (family === 4 ? 32 : 128) : Number(bits);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128)) throw new Error(`"${item}" has a bad prefix length`);
    allowed.addSubnet(net, prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return allowed;
}

export class BlockedAddressError extends Error {
  readonly code = 'ESVC_BLOCKED_ADDRESS';
  constructor(host: string) {
    super(`${host} is not a public address`);
  }
}

/** Whether an app may reach `address`: public, or inside an explicitly allowed network. */
export function addressAllowed(address: string, allowed: BlockList | null): boolean {
  if (isPublicAddress(address)) return true;
  if (!allowed) return false;
  const bare = address.replace(/%.*$/, '');
  return isIP(bare) === 4 ? allowed.check(bare, 'ipv4') : allowed.check(bare, 'ipv6');
}

/**
 * A `lookup` for net/tls.connect that refuses a host name resolving to any address an app may not
 * reach. It runs at connect time, on the very addresses the socket then uses, so a DNS answer
 * that changes between a check and the connection (rebinding) cannot slip through.
 */
export function guardedLookup(allowed: BlockList | null): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as dns.LookupAddress[];
      if (list.length === 0 || list.some((a) => !addressAllowed(a.address, allowed))) return callback(new BlockedAddressError(hostname), '', 0);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      callback(null, list[0].address, list[0].family);
    });
  };
}

/** For a URL whose host is an IP literal (no lookup happens then): the address, unbracketed. */
export function literalAddress(url: URL): string | null {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return isIP(host) ? host : null;
}
