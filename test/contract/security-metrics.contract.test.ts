import { describe, expect, it } from 'vitest';
import { createSecurityMetrics } from '../../src/adapters/auth/security-metrics.js';
import type { SecurityMetrics } from '../../src/ports/security-metrics.js';
import { type Counted, onFreshRegistry } from '../helpers/prometheus.js';

/** One contract, every security-metrics adapter (Prometheus counters are the one there is). */
describe.each([{ name: 'prometheus', make: (): Counted<SecurityMetrics> => onFreshRegistry(createSecurityMetrics) }])(
  'SecurityMetrics on $name',
  ({ make }) => {
    it('shows every known reason at 0 before the first event', async () => {
      const { read } = make();
      for (const reason of ['missing_header', 'token_mismatch', 'invalid_signature']) {
        expect(await read('csrf_failures_total', { reason })).toBe(0);
      }
      for (const reason of ['invalid_credentials', 'locked']) {
        expect(await read('login_failures_total', { reason })).toBe(0);
      }
    });

    it('counts each event under its own reason', async () => {
      const { metrics, read } = make();
      metrics.csrfFailure('token_mismatch');
      metrics.csrfFailure('token_mismatch');
      metrics.loginFailure('locked');
      metrics.lockout();
      expect(await read('csrf_failures_total', { reason: 'token_mismatch' })).toBe(2);
      expect(await read('csrf_failures_total', { reason: 'missing_header' })).toBe(0);
      expect(await read('login_failures_total', { reason: 'locked' })).toBe(1);
      expect(await read('login_failures_total', { reason: 'invalid_credentials' })).toBe(0);
      expect(await read('login_lockouts_total')).toBe(1);
    });
  },
);
