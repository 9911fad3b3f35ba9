/** Addresses of the app's pages that carry a parameter in their path. */

const STATS = /^\/app\/links\/([^/]+)\/stats\/?$/;

/** The statistics page of a link: `/app/links/<code>/stats`. */
export const linkStatsPath = (code: string) => `/app/links/${encodeURIComponent(code)}/stats`;

/** The code in a statistics page's path, or null when the path is not one. */
export function linkStatsCode(path: string): string | null {
  const encoded = STATS.exec(path)?.[1];
  if (encoded === undefined) return null;
  try {
    return decodeURIComponent(encoded);
  } catch {
    return null; // a malformed escape is no code
  }
}
