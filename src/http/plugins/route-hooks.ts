import type { RouteOptions } from 'fastify';

type LifecycleHook = 'onRequest' | 'preValidation' | 'onResponse';

/**
 * Appends `hook` to one route's own hooks, from an `onRoute` hook. Per-route hooks carry what
 * they need about the route in their closure, so nothing is looked up per request. Always a new
 * array: the options of an automatic HEAD route share the GET route's arrays.
 */
export function addRouteHook(route: RouteOptions, name: LifecycleHook, hook: (...args: never[]) => unknown): void {
  const existing = route[name] as unknown;
  const list = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing];
  (route as unknown as Record<LifecycleHook, unknown[]>)[name] = [...list, hook];
}
