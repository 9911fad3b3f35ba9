/** What a setting is: its declaration in the table, its name, its row in the README. */

import { integer, type Parser } from './parsers.js';
import type { RateLimitGroup } from './types.js';

/** One environment variable: its default, what it means (a row of the README's table), how it is read. */
export interface SettingDeclaration<T = unknown> {
  readonly default: string;
  readonly description: string;
  readonly parse: Parser<T>;
  /** Never echoed in error messages. */
  readonly secret?: boolean;
}

/** A declaration with its name, which is its key in the table. */
export type Setting<T = unknown, N extends string = string> = SettingDeclaration<T> & { readonly name: N };

/** Gives each declaration its key as its name, keeping the table's order. */
export function named<const T extends Record<string, SettingDeclaration>>(
  table: T,
): { readonly [N in keyof T]: T[N] & { readonly name: N } } {
  return Object.fromEntries(Object.entries(table).map(([name, declaration]) => [name, { name, ...declaration }])) as {
    readonly [N in keyof T]: T[N] & { readonly name: N };
  };
}

/** The names of a route group's rate-limit settings, e.g. `RATE_LIMIT_AUTH_LIMIT` and `RATE_LIMIT_AUTH_WINDOW_S`. */
export function rateLimitSettingNames<G extends RateLimitGroup>(group: G) {
  const prefix = `RATE_LIMIT_${group.toUpperCase() as Uppercase<G>}` as const;
  return { limit: `${prefix}_LIMIT` as const, window: `${prefix}_WINDOW_S` as const };
}

export function rateLimitSettings<const G extends RateLimitGroup>(
  group: G,
  limit: number,
  windowSeconds: number,
  who: string,
) {
  const names = rateLimitSettingNames(group);
  return {
    [names.limit]: {
      default: String(limit),
      description: `Requests admitted per window and client on ${who} (policy \`${group}\`).`,
      parse: integer(1, 1_000_000_000),
    },
    [names.window]: {
      default: String(windowSeconds),
      description: `Window of the \`${group}\` policy, in seconds (the token bucket refills \`limit\` tokens per window).`,
      parse: integer(1, 86_400),
    },
  } as Record<(typeof names)[keyof typeof names], SettingDeclaration<number>>;
}

/** The rows of the README's configuration table, in the order given. */
export function markdownTable(settings: readonly Setting[]): string {
  const rows = settings.map((s) => `| \`${s.name}\` | \`${s.default}\` | ${s.description.replace(/\|/g, '\\|')} |`);
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}
