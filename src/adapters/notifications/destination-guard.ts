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
const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, and the cloud metadata address 169.254.169.254
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7], // unique local, including fd00:ec2::254 (metadata)
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped?.[1]) return blocked.check(mapped[1], 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return true; // not an address at all
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
