/** Whether notifications may go to a destination, and if not, why (in words fit for a 422). */
export type DestinationVerdict =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly reason: 'forbidden' | 'unresolvable'; readonly detail: string };

/**
 * The SSRF check of a notification channel's URL when it is created: a host on a loopback,
 * private, link-local or reserved address is `forbidden`, one that does not resolve is
 * `unresolvable`. It never rejects. Every adapter passes
 * `test/contract/destination-guard.contract.test.ts`.
 *
 * @example
 *   const verdict = await guard.check(new URL('http://10.0.0.5/hook'));
 *   if (!verdict.allowed) throw errors.validation(`body: 'url' ${verdict.detail}`);
 */
export interface DestinationGuard {
  check(url: URL): Promise<DestinationVerdict>;
}
