import type { FastifyInstance } from 'fastify';

const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/**
 * Whether a named path parameter matched nothing. `/` matches `/:code` with an empty code, but it
 * names no resource: it is an unknown path (404), not an invalid code (422) nor a wrong method.
 */
export function hasEmptyPathParameter(params: unknown): boolean {
  if (typeof params !== 'object' || params === null) return false;
  for (const [name, value] of Object.entries(params)) if (name !== '*' && value === '') return true;
  return false;
}

/**
 * What the app serves: each path with its methods, recorded as routes are registered.
 * From it come the reserved short codes (first path segments) and the `Allow` header of 405s.
 */
export class RouteTable {
  private readonly paths = new Map<string, Set<string>>();
  private reserved: Set<string> | undefined;
  private sealed = false;

  /** Starts recording the routes that `app` registers from now on. */
  record(app: FastifyInstance): void {
    app.addHook('onRoute', (route) => {
      if (this.sealed) return;
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      const known = this.paths.get(route.url) ?? new Set<string>();
      for (const method of methods) known.add(method.toUpperCase());
      if (known.has('GET')) known.add('HEAD');
      this.paths.set(route.url, known);
      this.reserved = undefined;
    });
  }

  /**
   * Answers every method a known path does not serve: 405 with `Allow`, or 204 with `Allow`
   * for OPTIONS. Call after every other route has been registered.
   */
  registerMethodNotAllowed(app: FastifyInstance, methodNotAllowed: (allow: readonly string[]) => Error): void {
    this.sealed = true;
    for (const [url, methods] of this.paths) {
      const allow = METHOD_ORDER.filter((m) => methods.has(m) || m === 'OPTIONS');
      for (const method of METHOD_ORDER.filter((m) => !methods.has(m) && !app.hasRoute({ method: m, url }))) {
        app.route({
          method,
          url,
          schema: { hide: true },
          exposeHeadRoute: false,
          handler: async (request, reply) => {
            if (hasEmptyPathParameter(request.params)) return reply.callNotFound();
            if (method === 'OPTIONS') return reply.code(204).header('allow', allow.join(', ')).send();
            throw methodNotAllowed(allow);
          },
        });
      }
    }
  }

  /** Lower-case first path segments of the static routes: `health`, `shorten`, `urls`, … */
  reservedCodes(): ReadonlySet<string> {
    this.reserved ??= new Set(
      [...this.paths.keys()]
        .map((url) => url.split('/')[1] ?? '')
        .filter((segment) => segment !== '' && !segment.startsWith(':') && !segment.includes('*'))
        .map((segment) => segment.toLowerCase()),
    );
    return this.reserved;
  }
}
