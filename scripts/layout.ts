/**
 * The README's Layout section: the repository's folders (and the files directly in src/), each
 * with one line. A folder that is added needs its line here, one that is removed loses it;
 * `npm run docs` writes the block into README.md and the drift test checks it.
 */
import { execFileSync } from 'node:child_process';
import { dirname } from 'node:path';

/** Top-level folders in the order they are shown; inside each, entries go files first, then A to Z. */
export const LAYOUT: Readonly<Record<string, string>> = {
  src: 'the service',
  'src/app.ts': 'buildApp(): the Fastify app, no listen (tests inject into it)',
  'src/cli.ts': 'the `urlshortener` command: serve, migrate, openapi, config, create-admin, export, import',
  'src/cli-link-transfer.ts': '`urlshortener export` and `import`: links to and from CSV or JSON files, with progress',
  'src/cluster.ts': '`serve --workers N`: the primary that runs, restarts and stops the serving processes',
  'src/instrumentation.ts': 'loaded with --import: tracing starts before the modules it instruments',
  'src/server.ts': 'listen + graceful shutdown',
  'src/adapters': 'one folder per external concern, each implementing ports',
  'src/adapters/auth': 'bcrypt password hashing, JWT and CSRF tokens, the secret key, security metrics',
  'src/adapters/counters': "counters in memory, in Redis, or in a cluster's primary",
  'src/adapters/event-bus': 'NATS JetStream, the outbox and its relay, the consumer runner',
  'src/adapters/event-bus/embedded-log':
    'the embedded bus: a partitioned log in the database (the outbox itself), group consumers, leases',
  'src/adapters/notifications': 'the HTTP sender of webhooks and chat messages, and the guard on their destinations',
  'src/adapters/rate-limit': 'rate limiters in memory or in Redis',
  'src/adapters/redis': 'the Redis connection, its health, and the Redis copy of revocations and lockouts',
  'src/adapters/sandbox': 'QuickJS in WebAssembly on worker threads',
  'src/adapters/transfer':
    'the files of link import and export: CSV and JSON read as a stream, written a piece at a time',
  'src/adapters/storage':
    'Kysely on SQLite (better-sqlite3) and PostgreSQL (pg): the one schema, repositories, group commit',
  'src/adapters/storage/migrations': 'one migration per file, with the column helpers of both dialects',
  'src/adapters/telemetry': 'Prometheus metrics, OpenTelemetry tracing, samplers and the tracing wrappers',
  'src/composition': 'the one place that picks adapters from the configuration, by area; the disposer stack',
  'src/config': 'environment settings: the settings table, parsers and loader; validated once, frozen',
  'src/consumers': 'event handlers: event store, executor, notifier, cache invalidation',
  'src/domain': 'pure types and rules: URL mappings, users, executions, notifications, events, errors',
  'src/http': 'request handling: error mapping, caller identity, the route table, the redirect fast path',
  'src/http/plugins': 'Fastify plugins: sessions, CSRF, rate limiting, metrics, request tracing',
  'src/http/routes': 'the routes, with their TypeBox schemas; the web client under /app/',
  'src/ports': 'interfaces only: repositories, counters, rate limiter, event bus, sandbox, clock',
  'src/services': 'use cases: URL mappings, accounts, executions, notifications, dead letters, settings',
  'src/support': 'in-process machinery the use cases run on: redirect cache, click buffer, batch writer, paging',
  'src/types': 'type declarations for packages without their own',
  web: 'the web client: Svelte 5 + Vite, its own package.json (docs/web-client.md)',
  'web/scripts': 'checks the API types against docs/openapi.json',
  'web/src': 'the app: entry, routing between pages',
  'web/src/components': 'shared pieces: alert, dialogs, pager, QR code',
  'web/src/lib': 'the API client and its generated types, the session, paged lists',
  'web/src/pages': 'one component per page',
  'web/test': 'unit tests of the client (Vitest in Node)',
  test: 'the suites: real databases, Redis and NATS; in CI a missing one fails, elsewhere it skips',
  'test/architecture': 'the layering rule: inner layers import ports, never adapters or http/',
  'test/backends': 'PostgreSQL and Redis going away and coming back; state that outlives them',
  'test/bench': 'the benchmark harness',
  'test/composition': 'the composition root: the disposer stack',
  'test/config': 'settings and the command line',
  'test/contract': 'one suite per port, run against every adapter',
  'test/domain': 'domain rules: the error table',
  'test/docs': 'drift: generated documents, the layout and the dependencies match the code',
  'test/e2e': 'the web client in headless Chromium against the built server',
  'test/e2e-distributed': 'two API processes and a worker on PostgreSQL, Redis and NATS',
  'test/events': 'events, the outbox, dead letters, cache invalidation, NATS outages',
  'test/executions': 'script executions: limits, fairness, a worker killed mid-run',
  'test/faults': 'the fault suite: load with databases, Redis, NATS and workers failing under it',
  'test/fixtures': 'programs the tests run as processes of their own',
  'test/helpers': 'test apps, databases, servers of their own, clients',
  'test/http': 'the API through app.inject(), on SQLite and PostgreSQL',
  'test/notifications': 'channels and delivery to real receivers',
  'test/server': 'the built server in its own process (restart, kill -9)',
  'test/services': 'use cases with their adapters, without HTTP',
  'test/storage': 'storage adapters on their own: group commit, checkpoints, migrating existing databases',
  'test/storage/fixtures': 'what each migration left behind on main, recorded for both dialects',
  'test/telemetry': 'spans, sampling and OTLP export',
  bench: 'benchmarks that print ratios against a baseline run beside them (bench/README.md)',
  'bench/lib': 'the harness: targets, data sets, workloads, checks, the report',
  'bench/results': 'the latest run, as data and as a chart',
  'bench/wrk': 'wrk scripts of the workloads',
  scripts:
    'maintenance: README generation, an outbox check, the build (its bundling and its staleness check), the advisory audit',
  docs: 'the OpenAPI document and guides',
  '.ci': 'the CI job',
};

/** Folders holding files git tracks or would track, and the files directly in src/. */
export function layoutEntries(root = '.'): string[] {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
    cwd: root,
    encoding: 'utf8',
  })
    .split('\n')
    .filter(Boolean);
  const entries = new Set<string>();
  for (const file of files) {
    if (/^src\/[^/]+$/.test(file)) entries.add(file);
    for (let dir = dirname(file); dir !== '.'; dir = dirname(dir)) entries.add(dir);
  }
  return [...entries];
}

/** What LAYOUT lacks and what it names that is gone. */
export function layoutDrift(entries: readonly string[]): { undescribed: string[]; gone: string[] } {
  const present = new Set(entries);
  return {
    undescribed: entries.filter((entry) => !(entry in LAYOUT)).sort(),
    gone: Object.keys(LAYOUT).filter((entry) => !present.has(entry)),
  };
}

const isFile = (entry: string) => /\.[a-z]+$/.test(entry) && !entry.startsWith('.');

/** The Layout block of README.md (a code block), from the tree and LAYOUT. */
export function layoutMarkdown(entries: readonly string[] = layoutEntries()): string {
  const { undescribed, gone } = layoutDrift(entries);
  if (undescribed.length > 0 || gone.length > 0) {
    throw new Error(
      `scripts/layout.ts: describe ${undescribed.join(', ') || 'nothing new'}; drop ${gone.join(', ') || 'nothing'}`,
    );
  }
  const tops = Object.keys(LAYOUT).filter((entry) => !entry.includes('/'));
  const childrenOf = (parent: string) =>
    entries
      .filter((entry) => dirname(entry) === parent)
      .sort((a, b) => Number(isFile(b)) - Number(isFile(a)) || a.localeCompare(b));
  const lines: string[] = [];
  const add = (entry: string, depth: number) => {
    const name = `${'  '.repeat(depth)}${entry.split('/').at(-1)}${isFile(entry) ? '' : '/'}`;
    lines.push(`${name.padEnd(26)} ${LAYOUT[entry]}`);
    for (const child of childrenOf(entry)) add(child, depth + 1);
  };
  for (const top of tops) add(top, 0);
  return ['```', ...lines, '```'].join('\n');
}
