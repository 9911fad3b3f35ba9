/**
 * One backend the service needs in order to answer, as `GET /health/ready` checks it.
 *
 * @example
 *   const database: ReadinessCheck = { name: 'database', check: () => db.ping() };
 */
export interface ReadinessCheck {
  /** Named in the 503's detail: `database`, `redis`, … */
  readonly name: string;
  /** Resolves when the backend answers; rejects (or never settles) when it does not. */
  check(): Promise<void>;
  /** Figures shown beside the result (the outbox's backlog beside the bus); they never decide readiness. */
  detail?(): Promise<Readonly<Record<string, number>>>;
}
