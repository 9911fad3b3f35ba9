import { ApiError } from './auth-store';

/** The text to show for a failed call. */
export function messageOf(error: unknown): string {
  if (error instanceof ApiError) return error.detail;
  return error instanceof Error ? error.message : String(error);
}

/**
 * Whether a failure means the route is not on this server (yet): 404, or 405 where a path like
 * `/execute` would otherwise fall on the `/{code}` routes.
 */
export const isMissingRoute = (error: unknown) =>
  error instanceof ApiError && (error.status === 404 || error.status === 405);
