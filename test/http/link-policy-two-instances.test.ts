import { afterAll, describe, expect, it } from 'vitest';
import { adminEnv, useTestApp } from '../helpers/app.js';
import { AUTH_TEST_ENV, jsonPost } from '../helpers/auth.js';
import { postgres, useTestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, expectError, newMapping, postShorten } from '../helpers/http.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const ADMIN = { username: 'policy_admin', email: 'policy_admin@example.com', password: 'admin password 1' };
const available = postgres.available && (await redisAvailable());

/** LINK_WRITE_POLICY changed by an administrator on one instance holds on another within a second. */
describe('the link write policy across two instances sharing PostgreSQL and Redis', () => {
  const prefix = uniqueRedisPrefix('link-policy');
  afterAll(async () => {
    if (available) await deleteRedisKeys(prefix);
  });
  const database = useTestDatabase(postgres, available);
  const env = {
    ...AUTH_TEST_ENV,
    REDIS_URL,
    REDIS_KEY_PREFIX: prefix,
    SECRET_KEY: 'link-policy-secret-key-shared-by-every-instance',
    ...adminEnv(ADMIN),
  };
  const a = useTestApp(postgres, env, { accounts: true, database, admin: ADMIN, when: available });
  const b = useTestApp(postgres, env, { accounts: true, database, when: available });
  const code = codeMaker('pol');

  const setPolicy = async (policy: string) => {
    const response = await a.app.inject({
      method: 'PATCH',
      url: '/api/v1/admin/settings',
      headers: { ...a.admin.headers, 'content-type': 'application/json' },
      payload: JSON.stringify({ link_write_policy: policy }),
    });
    expect(response.statusCode, response.body).toBe(200);
  };

  it.skipIf(!available)(
    'owned set on one instance refuses anonymous creates on the other within a second',
    async () => {
      expect((await postShorten(b.app, newMapping(code))).statusCode).toBe(201);
      await setPolicy('owned');
      const changedAt = Date.now();
      try {
        await eventually(async () => expectError(await postShorten(b.app, newMapping(code)), 401), { timeoutMs: 1000 });
        expect(Date.now() - changedAt).toBeLessThan(1000);
        expectError(await jsonPost(b.app, '/api/v1/links', { url: 'https://example.com/' }), 401);
      } finally {
        await setPolicy('open');
      }
      await eventually(async () => expect((await postShorten(b.app, newMapping(code))).statusCode).toBe(201), {
        timeoutMs: 1000,
      });
    },
  );
});
