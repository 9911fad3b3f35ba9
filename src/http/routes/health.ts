import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { HealthResponse, ref } from '../schemas.js';

/** `GET /health`: liveness. */
export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/health',
    {
      config: { quietLogs: true },
      schema: {
        operationId: 'health_check',
        summary: 'Liveness probe',
        tags: ['infrastructure'],
        response: { 200: { ...ref(HealthResponse), description: 'The service is running.' } },
      },
    },
    async () => ({ status: 'ok' as const }),
  );
};
