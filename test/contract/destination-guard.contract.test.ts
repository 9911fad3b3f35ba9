import { describe, expect, it } from 'vitest';
import { DnsDestinationGuard } from '../../src/adapters/notifications/destination-guard.js';
import type { DestinationGuard } from '../../src/ports/destination-guard.js';

/** One contract, every destination guard (the DNS-resolving one is the one there is). */
describe.each([{ name: 'dns', make: (): DestinationGuard => new DnsDestinationGuard() }])(
  'DestinationGuard on $name',
  ({ make }) => {
    const guard = make();
    const check = (url: string) => guard.check(new URL(url));

    it('allows public addresses', async () => {
      expect(await check('https://93.184.216.34/hook')).toEqual({ allowed: true });
      expect(await check('http://[2606:2800:220:1:248:1893:25c8:1946]:8080/hook')).toEqual({ allowed: true });
    });

    it('forbids loopback, private, link-local and metadata addresses, saying which host', async () => {
      for (const url of [
        'http://127.0.0.1/',
        'http://10.0.0.5/',
        'http://192.168.1.1/',
        'http://169.254.169.254/latest/meta-data',
        'http://[::1]/',
        'http://[::ffff:10.0.0.1]/',
        'http://[fd00:ec2::254]/',
      ]) {
        const verdict = await check(url);
        expect(verdict, url).toMatchObject({ allowed: false, reason: 'forbidden' });
        expect(verdict.allowed || verdict.detail, url).toContain(new URL(url).hostname);
      }
    });

    // Every IPv6 form that reaches a refused IPv4 address or a non-public IPv6 range.
    it.each([
      ['http://[::]/', 'unspecified'],
      ['http://[::1]/', 'loopback'],
      ['http://[::127.0.0.1]/', 'IPv4-compatible loopback (::/96)'],
      ['http://[::10.0.0.1]/', 'IPv4-compatible private (::/96)'],
      ['http://[::8.8.8.8]/', 'IPv4-compatible, deprecated even when public (::/96)'],
      ['http://[::ffff:127.0.0.1]/', 'IPv4-mapped loopback'],
      ['http://[::ffff:7f00:1]/', 'IPv4-mapped loopback, hex'],
      ['http://[::ffff:169.254.169.254]/', 'IPv4-mapped metadata'],
      ['http://[::ffff:0:10.0.0.1]/', 'IPv4-translated private'],
      ['http://[2002:7f00:1::]/', '6to4 of 127.0.0.1'],
      ['http://[2002:a9fe:a9fe::1]/', '6to4 of 169.254.169.254'],
      ['http://[2002:5db8:d822::1]/', '6to4, any (2002::/16)'],
      ['http://[2001::1]/', 'Teredo (2001::/32)'],
      ['http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', 'Teredo'],
      ['http://[2001:2::1]/', 'benchmarking (2001:2::/48)'],
      ['http://[fec0::1]/', 'site-local (fec0::/10)'],
      ['http://[feff::1]/', 'site-local, top of fec0::/10'],
      ['http://[64:ff9b::7f00:1]/', 'NAT64 of loopback'],
      ['http://[64:ff9b::808:808]/', 'NAT64 (64:ff9b::/96)'],
      ['http://[64:ff9b:1::1]/', 'local-use NAT64 (64:ff9b:1::/48)'],
      ['http://[fe80::1]/', 'link-local'],
      ['http://[febf::1]/', 'link-local, top of fe80::/10'],
      ['http://[fc00::1]/', 'unique local'],
      ['http://[fd00:ec2::254]/', 'unique local (EC2 metadata)'],
      ['http://[ff02::1]/', 'multicast'],
      ['http://[ff0e::1]/', 'global multicast'],
      ['http://[100::1]/', 'discard-only'],
      ['http://[2001:db8::1]/', 'documentation'],
      ['http://[3fff::1]/', 'documentation (3fff::/20)'],
      ['http://[fe00::1]/', 'unassigned, outside global unicast 2000::/3'],
      ['http://[4000::1]/', 'unassigned, outside global unicast 2000::/3'],
    ])('forbids %s (%s)', async (url) => {
      expect(await check(url)).toMatchObject({ allowed: false, reason: 'forbidden' });
    });

    it.each([
      ['http://[2606:4700:4700::1111]/', 'public'],
      ['http://[2001:4860:4860::8888]/', 'public, beside 2001::/23'],
      ['http://[2003::1]/', 'public, beside 2002::/16'],
      ['http://[::ffff:8.8.8.8]/', 'IPv4-mapped public'],
    ])('allows %s (%s)', async (url) => {
      expect(await check(url)).toEqual({ allowed: true });
    });

    it('forbids a name that resolves to a forbidden address', async () => {
      expect(await check('http://localhost:8080/hook')).toMatchObject({ allowed: false, reason: 'forbidden' });
    });

    it('answers unresolvable, without rejecting, for a name that does not resolve', async () => {
      expect(await check('http://no-such-host.invalid/hook')).toEqual({
        allowed: false,
        reason: 'unresolvable',
        detail: 'host no-such-host.invalid cannot be resolved',
      });
    });
  },
);
