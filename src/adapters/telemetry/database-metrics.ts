import { Counter, type Registry } from 'prom-client';
import type { ConnectionLoss } from '../storage/database.js';

/**
 * `db_connections_lost_total{cause}`: PostgreSQL connections the pool lost, counted one by one
 * (the log says so at most once every few seconds). `broken`: the server or the network ended
 * it (a restart, a failover, `pg_terminate_backend`, a reset). `unanswered`: the service closed it,
 * a statement having gone unanswered on a path that was cut (DB_UNANSWERED_CHECK_MS).
 */
export function databaseConnectionMetrics(registry: Registry): (cause: ConnectionLoss) => void {
  const lost = new Counter({
    name: 'db_connections_lost_total',
    help: 'PostgreSQL connections lost, by cause: broken (ended by the server or the network) or unanswered (closed by the service after a statement went unanswered on a cut path, DB_UNANSWERED_CHECK_MS).',
    labelNames: ['cause'],
    registers: [registry],
  });
  for (const cause of ['broken', 'unanswered'] as const) lost.inc({ cause }, 0);
  return (cause) => lost.inc({ cause });
}
