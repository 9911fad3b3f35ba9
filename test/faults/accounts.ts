/**
 * Account state that must outlive a Redis that lost everything (issue #11, item 5): a session
 * logged out and an account locked out before the fault, through one API process, checked
 * through the other afterwards; and a new sign-in after it. And failed logins of one more account
 * made through both API processes before and during the fault (`fail`): each one answered 401
 * counts, so the fifth locks the account on both, whatever Redis's copy went through meanwhile.
 */
import { expect } from 'vitest';
import { signUp } from './cluster.js';
import { HttpClient } from './http-client.js';

export interface AccountState {
  /** A failed login of the counted account, through each API process in turn: its status. */
  fail(): Promise<number | null>;
  /**
   * Statuses after the fault: the logged-out session's `/me`, the locked account's login, a new
   * session's `/me`, and the counted account's login through each API process.
   */
  check(): Promise<{
    revoked: number | null;
    locked: number | null;
    fresh: number | null;
    counted: readonly (number | null)[];
  }>;
  close(): void;
}

export async function revokedAndLocked(targets: readonly string[]): Promise<AccountState> {
  const [a, b] = targets as [string, string];
  const client = new HttpClient(4);
  const me = (cookie: string) => client.request(a, 'GET', '/api/v1/auth/me', { headers: { cookie } });
  const login = (username: string, password: string, through = b) =>
    client.request(through, 'POST', '/api/v1/auth/login', { body: { username, password } });

  const revoked = await signUp(a, 'redisrevoked');
  const loggedOut = await client.request(b, 'POST', '/api/v1/auth/logout', {
    headers: { cookie: revoked.cookie, 'x-csrf-token': revoked.csrf },
  });
  expect(loggedOut.status, loggedOut.body).toBe(200);
  expect((await me(revoked.cookie)).status).toBe(401);
  const locked = await signUp(b, 'redislocked');
  for (let i = 0; i < 5; i++) expect((await login(locked.username, 'wrong password!')).status).toBe(401);
  expect((await login(locked.username, locked.password)).status).toBe(423);
  const counted = await signUp(a, 'rediscounted');
  let failures = 0;

  return {
    fail: async () => (await login(counted.username, 'wrong password!', targets[failures++ % 2])).status,
    async check() {
      const fresh = await signUp(b, 'redisafter').catch(() => undefined);
      return {
        revoked: (await me(revoked.cookie)).status,
        locked: (await login(locked.username, locked.password)).status,
        fresh: fresh ? (await me(fresh.cookie)).status : null,
        counted: [
          (await login(counted.username, counted.password, a)).status,
          (await login(counted.username, counted.password, b)).status,
        ],
      };
    },
    close: () => client.close(),
  };
}
