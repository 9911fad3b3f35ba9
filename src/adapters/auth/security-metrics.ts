import { Counter, type Registry } from 'prom-client';
import type { SecurityMetrics } from '../../ports/security-metrics.js';

/** Security events, counted on the process's Prometheus registry (exposed at `GET /metrics`). */
export function createSecurityMetrics(registry: Registry): SecurityMetrics {
  const csrf = new Counter({
    name: 'csrf_failures_total',
    help: 'Requests refused by CSRF validation, by reason.',
    labelNames: ['reason'],
    registers: [registry],
  });
  const login = new Counter({
    name: 'login_failures_total',
    help: 'Refused login attempts: invalid_credentials (401), locked (423) or throttled (429, too many failures from the address).',
    labelNames: ['reason'],
    registers: [registry],
  });
  const lockouts = new Counter({
    name: 'login_lockouts_total',
    help: 'Times a username reached the failed-attempt threshold and was locked.',
    registers: [registry],
  });
  // Known label values start at 0, so rates and alerts work before the first failure.
  for (const reason of ['missing_header', 'token_mismatch', 'invalid_signature']) csrf.inc({ reason }, 0);
  for (const reason of ['invalid_credentials', 'locked', 'throttled']) login.inc({ reason }, 0);
  return {
    csrfFailure: (reason) => csrf.inc({ reason }),
    loginFailure: (reason) => login.inc({ reason }),
    lockout: () => lockouts.inc(),
  };
}
