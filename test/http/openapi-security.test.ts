import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Item 7 of issue 14: the security schemes, and per operation which apply and its 401/403/429. */
describe('OpenAPI security', () => {
  const t = useTestApp(sqlite, {}, { accounts: true });
  let spec: Json;
  beforeAll(async () => {
    if (!sqlite.available) return;
    spec = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json<Json>();
  });
  const operation = (id: string): Json => {
    for (const item of Object.values(spec.paths as Json)) {
      for (const op of Object.values(item as Json)) if ((op as Json).operationId === id) return op as Json;
    }
    throw new Error(`no operation ${id}`);
  };
  const SESSION_WITH_CSRF = [{ session: [], csrf: [] }, { apiKey: [] }];
  const SESSION_READ = [{ session: [] }, { apiKey: [] }];

  it.skipIf(!sqlite.available)('declares the cookie session, its CSRF header and the bearer key', () => {
    expect(spec.components.securitySchemes).toEqual({
      session: expect.objectContaining({ type: 'apiKey', in: 'cookie', name: 'access_token' }),
      csrf: expect.objectContaining({ type: 'apiKey', in: 'header', name: 'X-CSRF-Token' }),
      apiKey: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    });
  });

  it.skipIf(!sqlite.available)('changes need the session with CSRF or a key; reads the session or a key', () => {
    for (const id of ['create_api_key', 'revoke_api_key', 'update_user', 'unlock_user', 'update_settings']) {
      expect(operation(id).security, id).toEqual(SESSION_WITH_CSRF);
    }
    for (const id of ['list_api_keys', 'list_users', 'me', 'get_settings']) {
      expect(operation(id).security, id).toEqual(SESSION_READ);
    }
  });

  it.skipIf(!sqlite.available)('authenticated operations answer 401 and 403; rate-limited ones 429', () => {
    for (const id of ['create_api_key', 'revoke_api_key', 'list_users', 'update_user', 'get_settings']) {
      const responses = operation(id).responses as Json;
      expect(Object.keys(responses), id).toEqual(expect.arrayContaining(['401', '403', '429']));
      expect(responses['429'].content['application/json'].schema.$ref).toBe('#/components/schemas/ErrorResponse');
    }
    // A user's own reads: neither a role nor CSRF can refuse them.
    for (const id of ['list_api_keys', 'me']) {
      expect(Object.keys(operation(id).responses), id).toEqual(expect.arrayContaining(['401', '429']));
      expect(operation(id).responses['403'], id).toBeUndefined();
    }
  });

  it.skipIf(!sqlite.available)('the anonymous spec operations declare no security, but their 429', () => {
    for (const id of ['resolve', 'login', 'register']) {
      expect(operation(id).security, id).toBeUndefined();
      expect(Object.keys(operation(id).responses), id).toContain('429');
    }
  });

  it.skipIf(!sqlite.available)('the URL operations take anyone, or a session (CSRF on writes) or a key', () => {
    for (const id of ['shorten', 'update', 'delete', 'create_link']) {
      expect(operation(id).security, id).toEqual([{}, ...SESSION_WITH_CSRF]);
      expect(Object.keys(operation(id).responses), id).toEqual(expect.arrayContaining(['401', '429']));
    }
    expect(operation('list_all').security).toEqual([{}, ...SESSION_READ]);
    expect(operation('health_check').responses['429']).toBeUndefined();
  });
});
