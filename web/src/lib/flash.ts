/** A one-time note handed from one page to the next (e.g. "account created" to the login page). */
let pending: { message: string; username?: string } | null = null;

export function setFlash(message: string, username?: string): void {
  pending = { message, ...(username ? { username } : {}) };
}

export function takeFlash(): { message: string; username?: string } | null {
  const flash = pending;
  pending = null;
  return flash;
}
