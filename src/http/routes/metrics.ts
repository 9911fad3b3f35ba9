import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Metrics } from '../../adapters/telemetry/metrics.js';

/** `GET /metrics`: Prometheus text exposition. */
export const metricsRoutes: FastifyPluginAsyncTypebox<{ metrics: Metrics }> = async (app, { metrics }) => {
  app.get(
    '/metrics',
    {
      config: { quietLogs: true, rateLimit: false },
      schema: {
        operationId: 'metrics',
        summary: 'Prometheus metrics',
        tags: ['infrastructure'],
        produces: ['text/plain'],
        response: { 200: { description: 'Prometheus text format.', type: 'string' } },
      },
    },
    async (_request, reply) => {
      const text = await metrics.registry.metrics();
      return reply.type(metrics.registry.contentType).send(text);
    },
  );
};
