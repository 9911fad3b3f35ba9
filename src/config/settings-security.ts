/** Settings of the hardening of issue 16 (spread into `SETTINGS`, after the lockout settings). */

import { integer } from './parsers.js';
import type { SettingDeclaration } from './setting-declaration.js';

export const SECURITY_SETTINGS = {
  LOGIN_ADDRESS_MAX_FAILURES: {
    default: '20',
    description:
      'Failed logins one client address may make, over every username, within `LOGIN_ADDRESS_WINDOW_MINUTES`; beyond it, its logins answer 429 with `Retry-After` until the window has passed since its last failure. A successful login does not reset it. Shared by every instance with Redis. `0`: no per-address limit (the per-username lockout stays).',
    parse: integer(0, 1_000_000),
  },
  LOGIN_ADDRESS_WINDOW_MINUTES: {
    default: '15',
    description: 'Window of `LOGIN_ADDRESS_MAX_FAILURES`, in minutes (sliding: each failure restarts it).',
    parse: integer(1, 1440),
  },
} satisfies Record<string, SettingDeclaration>;
