import type { FastifyReply } from 'fastify';

/** The two session cookies of spec §5.2. */
export const ACCESS_TOKEN_COOKIE = 'access_token';
export const CSRF_COOKIE = 'csrf_token';

const attributes = { secure: true, sameSite: 'strict', path: '/' } as const;

/** Sets both cookies; Max-Age is the token lifetime in seconds. */
export function setSessionCookies(
  reply: FastifyReply,
  accessToken: string,
  csrfToken: string,
  maxAgeSeconds: number,
): void {
  void reply.setCookie(ACCESS_TOKEN_COOKIE, accessToken, { ...attributes, httpOnly: true, maxAge: maxAgeSeconds });
  setCsrfCookie(reply, csrfToken, maxAgeSeconds);
}

/** The CSRF cookie alone: readable by the page's scripts, which echo it in `X-CSRF-Token`. */
export function setCsrfCookie(reply: FastifyReply, csrfToken: string, maxAgeSeconds: number): void {
  void reply.setCookie(CSRF_COOKIE, csrfToken, { ...attributes, httpOnly: false, maxAge: maxAgeSeconds });
}

/** Clears both cookies: empty values, Max-Age=0, the same attributes. */
export function clearSessionCookies(reply: FastifyReply): void {
  void reply.setCookie(ACCESS_TOKEN_COOKIE, '', { ...attributes, httpOnly: true, maxAge: 0 });
  void reply.setCookie(CSRF_COOKIE, '', { ...attributes, httpOnly: false, maxAge: 0 });
}
