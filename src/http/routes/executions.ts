import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { SPAN_ATTRIBUTES, setRequestSpanAttributes } from '../../adapters/telemetry/span-attributes.js';
import { EXECUTION_LANGUAGES, EXECUTION_STATUSES, TIMEOUT_MAX_MS } from '../../domain/execution.js';
import type { Execution } from '../../domain/execution.js';
import type { ExecutionService } from '../../services/execution-service.js';
import { callerOf } from '../caller.js';
import { errorResponse, oneOf } from '../schemas.js';

const ExecuteRequest = Type.Object(
  {
    language: oneOf(EXECUTION_LANGUAGES, { description: 'Only `javascript` for now.' }),
    script: Type.String({ minLength: 1, description: 'At most 64 KiB of UTF-8.' }),
    timeout_ms: Type.Optional(
      Type.Integer({ minimum: 1, maximum: TIMEOUT_MAX_MS, description: 'Deadline, default 5000, at most 10000.' }),
    ),
  },
  { additionalProperties: false },
);

const ExecutionRead = Type.Object({
  id: Type.String(),
  status: oneOf(EXECUTION_STATUSES),
  language: Type.String(),
  script: Type.String(),
  timeout_ms: Type.Integer(),
  output: Type.String({ description: 'Captured console output, at most 64 KiB.' }),
  result: Type.Unknown({
    description:
      'The completion value of the script, as JSON. One whose JSON is over 64 KiB is cut: a string, the start of that JSON text, ending with `[result truncated]`.',
  }),
  error: Type.Union([Type.String(), Type.Null()], {
    description: 'At most 64 KiB, ending with `[error truncated]` when cut.',
  }),
  truncated: Type.Boolean({
    description:
      'Whether output, result or error was cut at its limit. In a list, script, output and error show their first 1024 characters only, and a result whose JSON is longer the start of that JSON text, as a string (each cut one marked; this is then true): read the execution for the whole.',
  }),
  duration_ms: Type.Union([Type.Integer(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  started_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  finished_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

const tags = ['executions'];

function view(execution: Execution) {
  const { user_id: _owner, attempt: _attempt, claimed_until: _claim, ...rest } = execution;
  return rest;
}

const notSignedIn = errorResponse('Not signed in.');

const executeSchema = {
  operationId: 'execute',
  summary: 'Run a script in the sandbox',
  description: 'Queues the script and answers at once; follow `Location` for its status, output and result.',
  tags,
  body: ExecuteRequest,
  response: {
    202: Type.Object({ execution_id: Type.String(), status: Type.Literal('queued') }, { description: 'Queued.' }),
    401: notSignedIn,
    422: errorResponse('The body breaks a rule.'),
    429: errorResponse(
      'The caller has as many executions queued or running as allowed (EXECUTION_MAX_PENDING_PER_USER).',
    ),
  },
};

const getSchema = {
  operationId: 'get_execution',
  summary: 'One execution: status, output, result, error, duration',
  tags,
  params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
  response: {
    200: { ...ExecutionRead, description: 'The execution.' },
    401: notSignedIn,
    404: errorResponse('No such execution of yours.'),
  },
};

const listSchema = {
  operationId: 'list_executions',
  summary: "The caller's executions, newest first",
  tags,
  querystring: Type.Object(
    {
      limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
      before: Type.Optional(Type.String({ maxLength: 64 })),
    },
    { additionalProperties: false },
  ),
  response: {
    200: { type: 'array', items: ExecutionRead, description: 'The executions.' },
    401: notSignedIn,
    422: errorResponse('A query parameter breaks its rule.'),
  },
};

/** `POST /execute` (202, queued) and `GET /api/v1/executions[/{id}]` for the owner (or an admin). */
export const executionRoutes: FastifyPluginAsyncTypebox<{ executions: ExecutionService }> = async (
  app,
  { executions },
) => {
  const config = { auth: 'user' } as const;
  app.post('/execute', { config, schema: executeSchema }, async (request, reply) => {
    setRequestSpanAttributes({
      [SPAN_ATTRIBUTES.executionLanguage]: request.body.language,
      [SPAN_ATTRIBUTES.executionScriptLength]: request.body.script.length,
    });
    const execution = await executions.submit(callerOf(request), request.body);
    return reply
      .code(202)
      .header('location', `/api/v1/executions/${execution.id}`)
      .send({ execution_id: execution.id, status: 'queued' as const });
  });

  app.get('/api/v1/executions/:id', { config, schema: getSchema }, async (request) =>
    view(await executions.get(callerOf(request), request.params.id)),
  );

  app.get('/api/v1/executions', { config, schema: listSchema }, async (request, reply) => {
    const { limit, before } = request.query;
    const page = await executions.list(callerOf(request), { limit, before });
    if (page.nextBefore !== undefined) {
      void reply.header('link', `</api/v1/executions?limit=${limit}&before=${page.nextBefore}>; rel="next"`);
    }
    return page.executions.map(view);
  });
};
