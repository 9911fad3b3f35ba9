import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { DestinationGuard, DestinationVerdict } from '../../ports/destination-guard.js';

/**
 * The SSRF guard of outgoing notifications: destinations on loopback, private, link-local,
 * carrier-grade NAT, metadata, multicast or reserved addresses are refused, both when a channel
 * is created (its host is resolved) and at every connection (the address actually dialled is
 * checked, so a DNS answer that changes later cannot get around it).
 */
const blockedV4 = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, and the cloud metadata address 169.254.169.254
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blockedV4.addSubnet(network, prefix, 'ipv4');
}

/**
 * IPv6 ranges refused whole, inside global unicast 2000::/3 (everything outside it is refused
 * anyway, except IPv4-mapped addresses, which stand for their IPv4 address). The transition ranges that embed an IPv4 address (IPv4-compatible,
 * NAT64, 6to4, Teredo) are refused whole too, not only when the embedded address is private:
 * they are deprecated or local, and a relay or translator decides where they really go.
 */
const blockedV6 = new BlockList();
for (const [network, prefix] of [
  ['::', 96], // unspecified, loopback and the deprecated IPv4-compatible ::a.b.c.d
  ['64:ff9b::', 96], // NAT64, well-known prefix
  ['64:ff9b:1::', 48], // NAT64, local use
  ['100::', 64], // discard only
  ['2001::', 23], // IETF protocol assignments: Teredo 2001::/32, benchmarking, ORCHID
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4
  ['3fff::', 20], // documentation (RFC 9637)
  ['5f00::', 16], // SRv6 segment identifiers
  ['fc00::', 7], // unique local, including fd00:ec2::254 (metadata)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated, still routed as private on some networks)
  ['ff00::', 8], // multicast
] as const) {
  blockedV6.addSubnet(network, prefix, 'ipv6');
}

/** The 16 bytes of an IPv6 address (a zone index ignored), or undefined when it is not one. */
export function ipv6Bytes(address: string): Uint8Array | undefined {
  let text = address.replace(/%.*$/, '');
  if (isIP(text) !== 6) return undefined;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const groups = (part: string) => (part === '' ? [] : part.split(':'));
  const before = groups(head);
  const after = tail === undefined ? [] : groups(tail);
  const all = [...before, ...Array<string>(8 - before.length - after.length).fill('0'), ...after];
  const bytes = new Uint8Array(16);
  all.forEach((group, i) => {
    const value = parseInt(group, 16);
    bytes[2 * i] = value >> 8;
    bytes[2 * i + 1] = value & 0xff;
  });
  return bytes;
}

const isZero = (bytes: Uint8Array, from: number, to: number) => bytes.subarray(from, to).every((b) => b === 0);
const isFfff = (bytes: Uint8Array, at: number) => bytes[at] === 0xff && bytes[at + 1] === 0xff;

/** The IPv4 address an IPv4-mapped (::ffff:a.b.c.d) or IPv4-translated (::ffff:0:a.b.c.d) address stands for. */
function mappedIpv4(bytes: Uint8Array): string | undefined {
  const mapped = isZero(bytes, 0, 10) && isFfff(bytes, 10);
  const translated = isZero(bytes, 0, 8) && isFfff(bytes, 8) && isZero(bytes, 10, 12);
  return mapped || translated ? bytes.subarray(12).join('.') : undefined;
}

export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 4) return blockedV4.check(address, 'ipv4');
  const bytes = family === 6 ? ipv6Bytes(address) : undefined;
  if (!bytes) return true; // not an address at all
  const ipv4 = mappedIpv4(bytes);
  if (ipv4) return blockedV4.check(ipv4, 'ipv4');
  if ((bytes[0]! & 0xe0) !== 0x20) return true; // outside global unicast 2000::/3: nothing public there
  const hex = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16)).join(':');
  return blockedV6.check(hex, 'ipv6');
}

export class ForbiddenDestinationError extends Error {
  constructor(readonly host: string) {
    super(`Destination not allowed: ${host} is a loopback, private, link-local or reserved address`);
    this.name = 'ForbiddenDestinationError';
  }
}

/** Resolves the URL's host and refuses it when any of its addresses is forbidden. */
export async function assertAllowedDestination(url: URL): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) ? [{ address: host }] : await lookup(host, { all: true, verbatim: true });
  if (addresses.length === 0 || addresses.some((a) => isForbiddenAddress(a.address))) {
    throw new ForbiddenDestinationError(url.hostname);
  }
}

/** The guard at channel creation: the host's addresses, as DNS gives them now. */
export class DnsDestinationGuard implements DestinationGuard {
  async check(url: URL): Promise<DestinationVerdict> {
    try {
      await assertAllowedDestination(url);
      return { allowed: true };
    } catch (error) {
      if (error instanceof ForbiddenDestinationError)
        return { allowed: false, reason: 'forbidden', detail: error.message };
      return { allowed: false, reason: 'unresolvable', detail: `host ${url.hostname} cannot be resolved` };
    }
  }
}

/**
 * A `lookup` for `http.request` that fails the connection when any resolved address is forbidden.
 * It answers in the form asked for: Node's connection logic (with `autoSelectFamily`, the default
 * since Node 20) asks for `all: true` and expects a list back.
 */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
    if (error) return callback(error, '', 0);
    if (addresses.length === 0 || addresses.some((a) => isForbiddenAddress(a.address))) {
      return callback(new ForbiddenDestinationError(hostname), '', 0);
    }
    if (options.all) return callback(null, addresses);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  });
};

/**
 * Node dials an IP-literal host without calling `lookup`, so the connect-time guard checks
 * literals itself. Throws ForbiddenDestinationError for a forbidden literal.
 */
export function assertAllowedLiteral(url: URL): void {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0 && isForbiddenAddress(host)) throw new ForbiddenDestinationError(url.hostname);
}
