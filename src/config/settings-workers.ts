/** The setting of `serve --workers`: several serving processes on one port (src/cluster.ts). */

import { availableParallelism } from 'node:os';
import { autoOr, integer } from './parsers.js';

export const WORKER_SETTINGS = {
  WORKERS: {
    default: '1',
    description:
      "Serving processes on one port (node's cluster module), sharing the database: the first runs `ROLE`, the others the HTTP API (`worker` role: more consumers). `auto`: one per core. `urlshortener serve --workers N` overrides it.",
    parse: autoOr(availableParallelism, integer(1, 256)),
  },
} as const;
