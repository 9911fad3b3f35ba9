/**
 * Account state that must outlive a Redis that lost everything (issue #11, item 5): a session
 * logged out and an account locked out before the fault, through one API process, checked
 * through the other afterwards; and a new sign-in after it.
 */
import { expect } from 'vitest';
import { signUp } from './cluster.js';
import { HttpClient } from './http-client.js';

export interface AccountState {
  /** Statuses after the fault: the logged-out session's `/me`, the locked account's login, a new session's `/me`. */
  check(): Promise<{ revoked: number | null; locked: number | null; fresh: number | null }>;
  close(): void;
}

export async function revokedAndLocked(targets: readonly string[]): Promise<AccountState> {
  const [a, b] = targets as [string, string];
  const client = new HttpClient(4);
  const me = (cookie: string) => client.request(a, 'GET', '/api/v1/auth/me', { headers: { cookie } });
  const login = (username: string, password: string) =>
    client.request(b, 'POST', '/api/v1/auth/login', { body: { username, password } });

  const revoked = await signUp(a, 'redisrevoked');
  const loggedOut = await client.request(b, 'POST', '/api/v1/auth/logout', {
    headers: { cookie: revoked.cookie, 'x-csrf-token': revoked.csrf },
  });
  expect(loggedOut.status, loggedOut.body).toBe(200);
  expect((await me(revoked.cookie)).status).toBe(401);
  const locked = await signUp(b, 'redislocked');
  for (let i = 0; i < 5; i++) expect((await login(locked.username, 'wrong password!')).status).toBe(401);
  expect((await login(locked.username, locked.password)).status).toBe(423);

  return {
    async check() {
      const fresh = await signUp(b, 'redisafter').catch(() => undefined);
      return {
        revoked: (await me(revoked.cookie)).status,
        locked: (await login(locked.username, locked.password)).status,
        fresh: fresh ? (await me(fresh.cookie)).status : null,
      };
    },
    close: () => client.close(),
  };
}
