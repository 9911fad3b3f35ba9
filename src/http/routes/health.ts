import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { ReadinessCheck } from '../../ports/readiness-check.js';
import { HealthResponse, ref } from '../schemas.js';

export interface HealthRoutesOptions {
  /** Every backend in use; `GET /health/ready` answers 200 only when all of them answer. */
  readonly readiness?: readonly ReadinessCheck[];
  /** How long one check may take before its backend counts as unavailable. */
  readonly readinessTimeoutMs?: number;
}

const CheckResults = Type.Record(Type.String(), Type.Union([Type.Literal('ok'), Type.Literal('unavailable')]), {
  description: 'Each backend checked, by name.',
});

/** Whether `check` settles successfully within `timeoutMs`. */
async function passes(check: ReadinessCheck, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([
      check.check().then(
        () => true,
        () => false,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** `GET /health`: liveness. `GET /health/ready`: readiness, every backend in use answers. */
export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, options) => {
  const readiness = options.readiness ?? [];
  const timeoutMs = options.readinessTimeoutMs ?? 1000;

  app.get(
    '/health',
    {
      config: { quietLogs: true, rateLimit: false },
      schema: {
        operationId: 'health_check',
        summary: 'Liveness probe',
        tags: ['infrastructure'],
        response: { 200: { ...ref(HealthResponse), description: 'The service is running.' } },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/health/ready',
    {
      config: { quietLogs: true, rateLimit: false },
      schema: {
        operationId: 'readiness_check',
        summary: 'Readiness probe',
        description: `Checks every backend in use (the database, and Redis when configured), each within ${timeoutMs} ms.`,
        tags: ['infrastructure'],
        response: {
          200: Type.Object(
            { status: Type.Literal('ok'), checks: CheckResults },
            { description: 'Every backend answers.' },
          ),
          503: Type.Object(
            {
              detail: Type.String({
                description: 'Names the backends that do not answer, e.g. `redis is not available`.',
              }),
              checks: CheckResults,
            },
            { description: 'A backend does not answer.' },
          ),
        },
      },
    },
    async (_request, reply) => {
      const results = await Promise.all(readiness.map((check) => passes(check, timeoutMs)));
      const checks: Record<string, 'ok' | 'unavailable'> = {};
      const down: string[] = [];
      readiness.forEach((check, i) => {
        checks[check.name] = results[i] ? 'ok' : 'unavailable';
        if (!results[i]) down.push(check.name);
      });
      if (down.length === 0) return { status: 'ok' as const, checks };
      const detail = `${down.join(' and ')} ${down.length === 1 ? 'is' : 'are'} not available`;
      return reply.code(503).send({ detail, checks });
    },
  );
};
