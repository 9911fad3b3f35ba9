import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { ReadinessCheck } from '../../ports/readiness-check.js';
import { withDeadline } from '../../support/deadline.js';
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

const Details = Type.Optional(
  Type.Record(Type.String(), Type.Record(Type.String(), Type.Number()), {
    description:
      'Figures beside a check, which never decide readiness: beside the event bus, `outbox_depth` (events waiting for the bus) and `outbox_oldest_age_seconds` (how long the oldest has waited; both 0 with the embedded bus, whose log is the outbox).',
  }),
);

/** What `work` resolves to within `timeoutMs`, else `fallback` (also when it rejects). */
async function within<T>(work: () => Promise<T>, timeoutMs: number, fallback: T): Promise<T> {
  return withDeadline(work(), timeoutMs).catch(() => fallback);
}

/** Each check's result, and the details of those that have them and answer in time. */
async function examine(readiness: readonly ReadinessCheck[], timeoutMs: number) {
  const [results, figures] = await Promise.all([
    Promise.all(readiness.map((check) => within(() => check.check().then(() => true), timeoutMs, false))),
    Promise.all(
      readiness.map((check) => (check.detail ? within(check.detail.bind(check), timeoutMs, undefined) : undefined)),
    ),
  ]);
  const checks: Record<string, 'ok' | 'unavailable'> = {};
  const details: Record<string, Readonly<Record<string, number>>> = {};
  const down: string[] = [];
  readiness.forEach((check, i) => {
    checks[check.name] = results[i] ? 'ok' : 'unavailable';
    if (!results[i]) down.push(check.name);
    if (figures[i]) details[check.name] = figures[i];
  });
  return { checks, down, ...(Object.keys(details).length > 0 ? { details } : {}) };
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
        description: `Checks every backend in use (the database, the event bus, and Redis when configured), each within ${timeoutMs} ms. The outbox's backlog is shown beside the bus but never makes the service unready: while the broker is away, writes are still acknowledged and their events wait in the outbox.`,
        tags: ['infrastructure'],
        response: {
          200: Type.Object(
            { status: Type.Literal('ok'), checks: CheckResults, details: Details },
            { description: 'Every backend answers.' },
          ),
          503: Type.Object(
            {
              detail: Type.String({
                description: 'Names the backends that do not answer, e.g. `redis is not available`.',
              }),
              checks: CheckResults,
              details: Details,
            },
            { description: 'A backend does not answer.' },
          ),
        },
      },
    },
    async (_request, reply) => {
      const { down, ...results } = await examine(readiness, timeoutMs);
      if (down.length === 0) return { status: 'ok' as const, ...results };
      const detail = `${down.join(' and ')} ${down.length === 1 ? 'is' : 'are'} not available`;
      return reply.code(503).send({ detail, ...results });
    },
  );
};
