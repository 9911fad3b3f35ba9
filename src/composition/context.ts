import type { Logger } from 'pino';
import type { Metrics } from '../adapters/telemetry/metrics.js';
import type { Config } from '../config/config.js';
import type { Clock } from '../ports/clock.js';
import type { DisposerStack } from './disposer-stack.js';

/** What every part of the composition is built with. */
export interface CompositionContext {
  readonly config: Config;
  /** The process's logger, there from the start. */
  readonly logger: Logger;
  /** Where each part registers how it closes, as it opens. */
  readonly stack: DisposerStack;
  readonly metrics: Metrics;
  /** Time for tokens, lockouts and counters. */
  readonly clock: Clock;
  /** The clock the caller gave (tests), if any; the memory rate limiter keeps its monotonic one otherwise. */
  readonly givenClock?: Clock;
}
