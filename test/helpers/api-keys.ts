import { expect } from 'vitest';
import type { Session } from './auth.js';
import type { Injector } from './http.js';

export const API_KEYS = '/api/v1/auth/api-keys';

export interface CreatedKey {
  readonly id: number;
  readonly name: string;
  readonly prefix: string;
  readonly key: string;
  readonly created_at: string;
  readonly last_used_at: string | null;
  readonly expires_at: string | null;
  readonly revoked_at: string | null;
}

/** Makes an API key through a cookie session (with its CSRF token), expecting 201. */
export async function createApiKey(
  app: Injector,
  session: Session,
  body: { name: string; expires_at?: string } = { name: 'script' },
): Promise<CreatedKey> {
  const response = await app.inject({
    method: 'POST',
    url: API_KEYS,
    headers: { ...session.headers, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<CreatedKey>();
}

export function bearer(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

/** `GET /api/v1/auth/me` with the key. */
export function meByKey(app: Injector, key: string) {
  return app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) });
}

export function revokeApiKey(app: Injector, headers: Record<string, string>, id: number) {
  return app.inject({ method: 'DELETE', url: `${API_KEYS}/${id}`, headers });
}
