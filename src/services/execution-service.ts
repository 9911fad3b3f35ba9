import { errors } from '../domain/errors.js';
import { uuidv7 } from '../domain/events.js';
import {
  type Execution,
  type ExecutionEventFactory,
  type ExecutionRequest,
  SCRIPT_MAX_BYTES,
  TIMEOUT_DEFAULT_MS,
} from '../domain/execution.js';
import type { ExecutionRepository } from '../ports/execution-repository.js';
import { fetchPage } from '../support/paging.js';

export interface Caller {
  readonly userId: number;
  readonly role: 'user' | 'admin';
}

const executionNotFound = errors.executionNotFound;

/** Characters of script, output, result and error each execution shows in a list (read one for all). */
export const LIST_PREVIEW_CHARS = 1024;

export interface ExecutionServiceOptions {
  /** Queued and running executions one user may have; a submission beyond them is refused (429). */
  readonly maxPendingPerUser: number;
}

/** `POST /execute` and the executions read model: submit, read one, list one's own. */
export class ExecutionService {
  constructor(
    private readonly executions: ExecutionRepository,
    private readonly events: ExecutionEventFactory,
    private readonly options: ExecutionServiceOptions,
  ) {}

  /**
   * Queues the script; `execution.requested` is recorded with it, so an accepted request is never
   * lost. 429 when the caller already has `maxPendingPerUser` queued or running.
   */
  async submit(caller: Caller, request: ExecutionRequest): Promise<Execution> {
    if (Buffer.byteLength(request.script, 'utf8') > SCRIPT_MAX_BYTES) {
      throw errors.validation(`body: 'script' must be at most ${SCRIPT_MAX_BYTES} bytes`);
    }
    const payload = {
      execution_id: uuidv7(),
      user_id: caller.userId,
      language: request.language,
      script: request.script,
      timeout_ms: request.timeout_ms ?? TIMEOUT_DEFAULT_MS,
    };
    const limit = this.options.maxPendingPerUser;
    const execution = await this.executions.create(payload, limit, () => [this.events.requested(payload)]);
    if (!execution) throw errors.tooManyExecutions(limit);
    return execution;
  }

  /** The owner and admins see an execution; anyone else gets the same 404 as for a missing one. */
  async get(caller: Caller, id: string): Promise<Execution> {
    const execution = await this.executions.get(id);
    if (!execution || (execution.user_id !== caller.userId && caller.role !== 'admin')) throw executionNotFound();
    return execution;
  }

  /**
   * The caller's executions, newest first, each with its long texts cut to a preview (so a page
   * stays small); `nextBefore` is set when older ones exist.
   */
  async list(caller: Caller, options: { limit: number; before?: string }) {
    const { items: executions, more } = await fetchPage(options.limit, (limit) =>
      this.executions.listByUser(caller.userId, { ...options, limit: limit!, previewChars: LIST_PREVIEW_CHARS }),
    );
    return more ? { executions, nextBefore: executions[executions.length - 1]!.id } : { executions };
  }
}
