import { EVENT_TYPES, TOPICS } from '../domain/events.js';
import {
  type ExecutionEventFactory,
  type ExecutionOutcome,
  type ExecutionRequestedPayload,
  FINAL_STATUSES,
} from '../domain/execution.js';
import type { ExecutionRepository } from '../ports/execution-repository.js';
import type { Sandbox } from '../ports/sandbox.js';
import type { ConsumerDefinition } from '../services/consumer-runner.js';

export interface ExecutorLimits {
  readonly memoryBytes: number;
  readonly outputBytes: number;
}

/**
 * Runs each requested script in the sandbox: `execution.started`, then `execution.completed`,
 * `execution.failed` or `execution.timed_out`, each recorded with its state change. A request
 * delivered again after it finished is skipped; one that was running when a worker died runs again.
 */
export function executorConsumer(
  executions: ExecutionRepository,
  sandbox: Sandbox,
  events: ExecutionEventFactory,
  limits: ExecutorLimits,
): ConsumerDefinition {
  return {
    group: 'executor',
    topics: [TOPICS.execution],
    handle: async (message, span) => {
      if (message.envelope.event_type !== EVENT_TYPES.executionRequested) return;
      const request = message.envelope.payload as ExecutionRequestedPayload;
      span.setAttributes({
        'execution.id': request.execution_id,
        'execution.language': request.language,
        'execution.script.length': request.script.length,
      });
      const current = await executions.get(request.execution_id);
      if (!current || FINAL_STATUSES.has(current.status)) return;
      if (current.status === 'queued') {
        await executions.markRunning(request.execution_id, () => [
          events.started(request.execution_id, request.user_id),
        ]);
      }
      const run = await sandbox.run(request.script, { timeoutMs: request.timeout_ms, ...limits });
      const outcome: ExecutionOutcome = {
        status: run.status,
        output: run.output,
        result: run.result,
        error: run.error,
        duration_ms: run.durationMs,
      };
      span.setAttribute('execution.status', outcome.status);
      await executions.finish(request.execution_id, outcome, () => [
        events.finished(request.execution_id, request.user_id, outcome),
      ]);
    },
  };
}
