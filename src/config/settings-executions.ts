/** The settings of executions: the sandbox and the workers' queue (`POST /execute`). */

import { availableParallelism } from 'node:os';
import { autoOr, integer } from './parsers.js';

export const EXECUTION_SETTINGS = {
  SANDBOX_MEMORY_MB: {
    default: '64',
    description: 'Memory cap of one script run in the sandbox.',
    parse: integer(8, 1024),
  },
  SANDBOX_NICE: {
    default: '10',
    description:
      "Nice value of the sandbox threads, 0 to 19 (Linux; elsewhere they keep the process's priority). Where the CPU is busy a thread gets a share by its nice value: at 10 a script gets about a tenth of what a thread at 0 beside it gets, so scripts yield the CPU to the serving and consuming threads of their process (role `all`) and to the machine's other processes. A script's deadline is wall time: on a busy machine a niced script does less within it. 0: the process's own priority.",
    parse: integer(0, 19),
  },
  EXECUTION_CONCURRENCY: {
    default: 'auto',
    description:
      'Sandbox threads per worker: scripts one worker runs at once. `auto`: the number of CPU cores. More wait, `queued`, for a thread.',
    parse: autoOr(availableParallelism, integer(1, 256)),
  },
  EXECUTION_MAX_THREADS_PER_USER: {
    default: 'auto',
    description:
      "Sandbox threads of a worker that one user's executions may hold at once; free threads go to users in turn. `auto`: all but one (at least one), so one user's long scripts never make another's wait.",
    parse: autoOr(() => undefined, integer(1, 256)),
  },
  EXECUTION_MAX_PENDING_PER_USER: {
    default: '10',
    description:
      'Queued and running executions one user may have at once, over all instances; `POST /execute` answers 429 beyond it.',
    parse: integer(1, 100_000),
  },
  EXECUTION_ACK_WAIT_MS: {
    default: '5000',
    description:
      "How long a worker may go without a heartbeat before its executions (and the event batches it was storing) pass to another worker: the executor's and the event store's ack wait on NATS, their lease on the embedded log, and a claim's lease in the database. Heartbeats go every third of it.",
    parse: integer(300, 600_000),
  },
} as const;
