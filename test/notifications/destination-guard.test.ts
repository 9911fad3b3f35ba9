/**
 * The SSRF guard of outgoing notifications: which addresses are forbidden, the check at channel
 * creation, and the check at connect time (the address actually dialled), for host names and
 * for address literals (which Node dials without a lookup).
 */
import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  assertAllowedDestination,
  ForbiddenDestinationError,
  guardedLookup,
  isForbiddenAddress,
} from '../../src/adapters/notifications/destination-guard.js';
import { DeliveryError, postJson } from '../../src/adapters/notifications/http-notification-sender.js';
import { Receiver } from './receiver.js';

// `public.test` resolves to public addresses here and `mixed.test` to a public and a private one
// (no real DNS needed); every other name resolves as usual.
const FIXED = vi.hoisted((): Record<string, { address: string; family: number }[]> => ({
  'public.test': [
    { address: '93.184.216.34', family: 4 },
    { address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 },
  ],
  'mixed.test': [
    { address: '93.184.216.34', family: 4 },
    { address: '10.0.0.5', family: 4 },
  ],
}));
vi.mock('node:dns/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:dns/promises')>();
  const lookup = async (hostname: string, options: { all?: boolean }) => {
    const fixed = FIXED[hostname];
    if (!fixed) return actual.lookup(hostname, options as never);
    return options.all ? fixed : fixed[0];
  };
  return { ...actual, default: { ...actual, lookup }, lookup };
});
vi.mock('node:dns', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:dns')>();
  const lookup = (hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    const fixed = FIXED[hostname];
    if (!fixed) return actual.lookup(hostname, options as never, callback as never);
    setImmediate(() => (options.all ? callback(null, fixed) : callback(null, fixed[0]!.address, fixed[0]!.family)));
  };
  return { ...actual, default: { ...actual, lookup }, lookup };
});

describe('isForbiddenAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private 10/8'],
    ['10.255.255.255', 'private 10/8'],
    ['172.16.0.1', 'private 172.16/12'],
    ['172.31.255.254', 'private 172.16/12'],
    ['192.168.0.1', 'private 192.168/16'],
    ['192.168.255.255', 'private 192.168/16'],
    ['169.254.169.254', 'cloud metadata'],
    ['169.254.0.1', 'link-local'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.254', 'carrier-grade NAT'],
    ['0.0.0.0', 'this network'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['::1', 'IPv6 loopback'],
    ['::', 'IPv6 unspecified'],
    ['fc00::', 'unique local'],
    ['fc00::1', 'unique local'],
    ['fd00:ec2::254', 'unique local (EC2 metadata)'],
    ['fe80::', 'IPv6 link-local'],
    ['fe80::1', 'IPv6 link-local'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::FFFF:10.0.0.1', 'IPv4-mapped private'],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
    ['ff02::1', 'IPv6 multicast'],
    ['localhost', 'not an address'],
    ['', 'empty'],
  ])('%s (%s) is forbidden', (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '172.15.255.255', // just below 172.16/12
    '172.32.0.1', // just above it
    '100.63.255.255', // just below 100.64/10
    '100.128.0.1', // just above it
    '192.169.0.1',
    '169.255.0.1',
    '11.0.0.1',
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
  ])('%s (public) is allowed', (address) => {
    expect(isForbiddenAddress(address)).toBe(false);
  });
});

describe('assertAllowedDestination (channel creation)', () => {
  it.each([
    'http://127.0.0.1/',
    'http://localhost:8080/',
    'http://10.0.0.1/',
    'http://172.16.0.1/',
    'http://192.168.1.1/',
    'http://169.254.169.254/latest/meta-data/',
    'http://100.64.0.1/',
    'http://[::1]/',
    'http://[fc00::1]/',
    'http://[fe80::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://mixed.test/', // one public address and one private: refused
  ])('refuses %s', async (url) => {
    await expect(assertAllowedDestination(new URL(url))).rejects.toBeInstanceOf(ForbiddenDestinationError);
  });

  it.each(['https://public.test/hook', 'http://93.184.216.34/', 'http://[2606:4700:4700::1111]/'])(
    'allows %s',
    async (url) => {
      await expect(assertAllowedDestination(new URL(url))).resolves.toBeUndefined();
    },
  );
});

describe('guardedLookup (connect time)', () => {
  const call = (hostname: string, options: { all?: boolean; family?: number }) =>
    new Promise<{ error: Error | null; address: string | LookupAddress[]; family?: number }>((resolve) =>
      guardedLookup(hostname, options, (error, address, family) => resolve({ error, address, family })),
    );

  it('answers a public name in the form asked for: one address, or the list (as Node asks with autoSelectFamily)', async () => {
    expect(await call('public.test', {})).toEqual({ error: null, address: '93.184.216.34', family: 4 });
    expect(await call('public.test', { all: true })).toEqual({
      error: null,
      address: [
        { address: '93.184.216.34', family: 4 },
        { address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 },
      ],
      family: undefined,
    });
  });

  it('fails the connection for a name resolving to a forbidden address, either form', async () => {
    for (const options of [{}, { all: true }]) {
      for (const hostname of ['localhost', 'mixed.test']) {
        const { error } = await call(hostname, options);
        expect(error, `${hostname} ${JSON.stringify(options)}`).toBeInstanceOf(ForbiddenDestinationError);
      }
    }
  });
});

describe('postJson with the guard on', () => {
  const receiver = new Receiver();
  beforeAll(() => receiver.listen());
  afterAll(() => receiver.close());

  const guardOn = { timeoutMs: 1000, allowPrivate: false };
  const guardOff = { timeoutMs: 1000, allowPrivate: true };

  it('refuses a private destination, by name or by address literal, before anything is sent', async () => {
    for (const host of ['localhost', '127.0.0.1', '[::ffff:127.0.0.1]']) {
      await expect(postJson(`http://${host}:${receiver.port}/guarded`, '{}', {}, guardOn)).rejects.toBeInstanceOf(
        ForbiddenDestinationError,
      );
    }
    expect(receiver.requests).toEqual([]);
  });

  it('with private destinations allowed, the same receiver is reached', async () => {
    await expect(
      postJson(`http://127.0.0.1:${receiver.port}/open`, '{"a":1}', { 'x-test': 'yes' }, guardOff),
    ).resolves.toBe(200);
    await expect(postJson(`http://localhost:${receiver.port}/open`, '{"a":2}', {}, guardOff)).resolves.toBe(200);
    const [first] = receiver.to('/open');
    expect(first).toMatchObject({ method: 'POST', body: '{"a":1}' });
    expect(first!.headers).toMatchObject({
      'content-type': 'application/json',
      'x-test': 'yes',
      'content-length': '7',
    });
  });

  it('a 3xx is a failure and is not followed; a non-2xx is a failure', async () => {
    receiver.on('/redirect', () => ({ status: 301, location: '/elsewhere' }));
    receiver.on('/error', () => ({ status: 404 }));
    await expect(postJson(`${receiver.url}/redirect`, '{}', {}, guardOff)).rejects.toMatchObject({
      name: 'DeliveryError',
      status: 301,
    });
    await expect(postJson(`${receiver.url}/error`, '{}', {}, guardOff)).rejects.toBeInstanceOf(DeliveryError);
    expect(receiver.to('/elsewhere')).toEqual([]);
  });

  it('a receiver that never answers fails within the timeout', async () => {
    receiver.on('/hang', () => 'hang');
    const started = Date.now();
    await expect(postJson(`${receiver.url}/hang`, '{}', {}, { ...guardOff, timeoutMs: 200 })).rejects.toThrow(
      /No answer within 200 ms/,
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    await receiver.to('/hang')[0]!.closed;
  });
  it('the deadline covers the whole exchange: a receiver trickling its answer fails within it too', async () => {
    const drip = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'text/plain' });
        const timer = setInterval(() => response.write('.'), 50);
        response.on('close', () => clearInterval(timer));
      });
    });
    await new Promise<void>((resolve) => drip.listen(0, '127.0.0.1', resolve));
    try {
      const port = (drip.address() as AddressInfo).port;
      const outcome = await Promise.race([
        postJson(`http://127.0.0.1:${port}/`, '{}', {}, { ...guardOff, timeoutMs: 300 }).then(
          () => 'delivered',
          (error: Error) => error.message,
        ),
        new Promise((resolve) => setTimeout(() => resolve('still waiting after 5 s'), 5000)),
      ]);
      expect(outcome).toBe('No answer within 300 ms');
    } finally {
      drip.closeAllConnections();
      await new Promise((resolve) => drip.close(resolve));
    }
  });
});
