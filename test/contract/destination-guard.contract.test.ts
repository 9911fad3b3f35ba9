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
