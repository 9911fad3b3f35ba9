#!/usr/bin/env node
import { type Config, ConfigError, loadConfig, ROLES, type Role, settingsMarkdown } from './config/config.js';
import { startupFailure } from './composition/startup-failure.js';
import { createInterface } from 'node:readline';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AppError } from './domain/errors.js';
import cluster from 'node:cluster';
import { WORKER_SETTINGS } from './config/settings-workers.js';
import type { TransferOptions } from './cli-link-transfer.js';
import { enableCompileCache } from './support/compile-cache.js';

// The service's modules (the HTTP app, the adapters, their drivers: about a second to load) are
// imported by the commands that use them, so that `--help`, a usage error or `config` answer at once.

/** What each command is for, and its options: the text of `<command> --help`. */
const COMMANDS = {
  serve: {
    usage: 'serve [--role all|api|worker] [--workers N|auto]',
    help: `Start the service and run until SIGTERM or SIGINT, which stop it gracefully.

options:
  --role all|api|worker  what to run (default: the ROLE setting, or all): the HTTP API and every
                         event consumer (all), the HTTP API only (api), the consumers only (worker)
  --workers N|auto       serving processes on one port (default: the WORKERS setting, or 1;
                         auto = one per core); the first runs the role, the others the API

Settings come from the environment; \`urlshortener config --markdown\` lists them.`,
    options: { role: { type: 'string' }, workers: { type: 'string' } },
  },
  migrate: {
    usage: 'migrate',
    help: 'Bring the database schema (DATABASE_URL) up to date and exit. `serve` does it too at start.',
    options: {},
  },
  openapi: {
    usage: 'openapi',
    help: 'Print the OpenAPI document (JSON) of the HTTP API. Needs no database.',
    options: {},
  },
  'create-admin': {
    usage: 'create-admin --username NAME --email ADDRESS',
    help: `Create an administrator in the database (DATABASE_URL). The password comes from
ADMIN_PASSWORD, or else the first line of standard input.

options:
  --username NAME     3 to 32 of letters, digits, _ . -
  --email ADDRESS     the administrator's email address`,
    options: { username: { type: 'string' }, email: { type: 'string' } },
  },
  export: {
    usage: 'export [--format csv|json] [--out FILE] [--owner USERNAME]',
    help: `Write every link of the database (DATABASE_URL), or one user's, as CSV or JSON: the columns
code, url, created_at, click_count, expires_at, max_visits. Read a page at a time, so any number of
links takes little memory. Progress goes to standard error (a bar on a terminal, lines otherwise).

options:
  --format csv|json   the format (default: the extension of --out, else json)
  --out FILE          write to FILE instead of standard output
  --owner USERNAME    only the links this user owns`,
    options: { format: { type: 'string' }, out: { type: 'string' }, owner: { type: 'string' } },
  },
  import: {
    usage: 'import FILE [--dry-run] [--format csv|json] [--owner USERNAME]',
    help: `Add the links of FILE (CSV with a header row, or a JSON array of objects; the columns of
\`export\`, code and url required) to the database (DATABASE_URL), checked as the create routes check
them; created_at and click_count are kept when given. Any number of rows, written in batches with
their url.created events. A row whose code is taken (in the database or by an earlier row) is
skipped. Each row not created is printed with the reason, then the totals; progress goes to standard
error. Exit 0 when the file was read to the end, 1 when the database failed part-way (the rows
printed as created before it are stored, none after), 65 when the file cannot be read as its format.

options:
  --dry-run           check every row and say what would happen; write nothing
  --format csv|json   the file's format (default: its extension)
  --owner USERNAME    the links' owner (default: none, as links created anonymously)`,
    options: { 'dry-run': { type: 'boolean' }, format: { type: 'string' }, owner: { type: 'string' } },
    positionals: true,
  },
  config: {
    usage: 'config --markdown',
    help: `Describe the settings (environment variables).

options:
  --markdown          print the table of every setting, its default and its meaning (Markdown)`,
    options: { markdown: { type: 'boolean' } },
  },
} as const satisfies Record<
  string,
  { usage: string; help: string; options: ParseArgsConfig['options']; positionals?: boolean }
>;

type Command = keyof typeof COMMANDS;

const USAGE = `usage: urlshortener <command> [options]

commands:
${Object.values(COMMANDS)
  .map((c) => `  ${c.usage}`)
  .join('\n')}

\`urlshortener <command> --help\` says more about each; with no command, \`serve\`.
`;

const EX_USAGE = 64;
const EX_CONFIG = 78;

const HELP_FLAGS = new Set(['--help', '-h', 'help']);

function commandHelp(command: Command): string {
  return `usage: urlshortener ${COMMANDS[command].usage}\n\n${COMMANDS[command].help}\n`;
}

function isCommand(name: string): name is Command {
  return Object.hasOwn(COMMANDS, name);
}

/** Option values by name; the command's arguments (`import FILE`) under `_`. */
type Options = Record<string, string | boolean | string[] | undefined>;

/** The command's options (its arguments in `_`), or undefined after saying what is wrong with them (exit EX_USAGE). */
function parseOptions(command: Command, args: readonly string[]): Options | undefined {
  const spec: { options: ParseArgsConfig['options']; positionals?: boolean } = COMMANDS[command];
  try {
    const { values, positionals } = parseArgs({
      args: [...args],
      options: spec.options,
      strict: true,
      allowPositionals: spec.positionals === true,
    });
    return { ...(values as Record<string, string | boolean>), _: positionals };
  } catch (error) {
    process.stderr.write(`${command}: ${(error as Error).message}\n\n${commandHelp(command)}`);
    return undefined;
  }
}

async function main(argv: readonly string[]): Promise<number> {
  const [command = 'serve', ...rest] = argv;
  if (HELP_FLAGS.has(command)) {
    const about = rest[0];
    process.stdout.write(about !== undefined && isCommand(about) ? commandHelp(about) : USAGE);
    return 0;
  }
  if (!isCommand(command)) {
    process.stderr.write(`unknown command: ${command}\n\n${USAGE}`);
    return EX_USAGE;
  }
  if (rest.some((arg) => arg === '--help' || arg === '-h')) {
    process.stdout.write(commandHelp(command));
    return 0;
  }
  const options = parseOptions(command, rest);
  if (options === undefined) return EX_USAGE;
  if (command === 'config') {
    process.stdout.write(options.markdown ? `${settingsMarkdown()}\n` : commandHelp('config'));
    return 0;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return EX_CONFIG;
    }
    throw error;
  }
  try {
    return await run(command, config, options);
  } catch (error) {
    const line = startupFailure(error, config);
    if (line === undefined) throw error;
    process.stderr.write(`${line}\n`);
    return 1;
  }
}

function run(command: Exclude<Command, 'config'>, config: Config, options: Options) {
  switch (command) {
    case 'serve':
      return serveCommand(config, options.role as string | undefined, options.workers as string | undefined);
    case 'migrate':
      return migrate(config);
    case 'openapi':
      return printOpenApi(config);
    case 'create-admin':
      return createAdmin(config, options.username as string | undefined, options.email as string | undefined);
    case 'export':
      return import('./cli-link-transfer.js').then((m) => m.exportCommand(config, options as TransferOptions));
    case 'import':
      return import('./cli-link-transfer.js').then((m) =>
        m.importCommand(config, (options._ as string[])[0], options as TransferOptions),
      );
  }
}

async function migrate(config: Config): Promise<number> {
  const applied = await migrateSchema(config);
  process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n');
  return 0;
}

/** Brings the database's schema up to date once it answers (DB_START_TIMEOUT_MS); answers the migrations it applied. */
async function migrateSchema(config: Config): Promise<readonly string[]> {
  const [{ openDatabase }, { migrateOnceItAnswers }] = await Promise.all([
    import('./adapters/storage/database.js'),
    import('./composition/storage.js'),
  ]);
  const database = openDatabase(config.database);
  try {
    return await migrateOnceItAnswers(database, config.database, (line) => process.stderr.write(`${line}\n`));
  } finally {
    await database.close();
  }
}

/** `serve [--role all|api|worker] [--workers N|auto]`: runs until a signal stops it. */
async function serveCommand(
  config: Config,
  roleOption: string | undefined,
  workersOption: string | undefined,
): Promise<number> {
  const role = roleOption ?? config.role;
  if (!(ROLES as readonly string[]).includes(role)) {
    process.stderr.write(`--role must be one of ${ROLES.join(', ')}\n`);
    return EX_USAGE;
  }
  const workers = workersOption === undefined ? config.workers : WORKER_SETTINGS.WORKERS.parse(workersOption);
  if (typeof workers !== 'number') {
    process.stderr.write(`--workers ${workers.problem}\n`);
    return 64;
  }
  if (workers > 1 && cluster.isPrimary) return servePrimary({ ...config, role: role as Role, workers });
  const [{ primaryStopRequests }, { serve }] = await Promise.all([import('./cluster.js'), import('./server.js')]);
  // A worker of a cluster also stops when its primary asks (see src/cluster.ts).
  const onStopRequest = cluster.isWorker ? primaryStopRequests() : undefined;
  await serve({ ...config, role: role as Role, workers: 1 }, onStopRequest ? { onStopRequest } : {});
  return -1; // keep running
}

/**
 * The primary of `--workers N`: brings the schema up to date and makes the generated secret key
 * once (so the workers neither race for them nor disagree), then runs the serving processes.
 */
async function servePrimary(config: Config): Promise<number> {
  await migrateSchema(config);
  const [{ resolveSecretKey }, { runPrimary }, { createLogger }] = await Promise.all([
    import('./adapters/auth/secret-key.js'),
    import('./cluster.js'),
    import('./composition/logger.js'),
  ]);
  resolveSecretKey(config.auth);
  return runPrimary({
    workers: config.workers,
    role: config.role,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    logger: createLogger(config),
    workerArgs: (role) => ['serve', '--role', role, '--workers', '1'],
  });
}

/** The document depends on the routes only: they are built over a throw-away in-memory database. */
async function printOpenApi(config: Config): Promise<number> {
  const { compose } = await import('./composition/compose.js');
  const service = await compose(
    // No key file either: the document needs no stable secret.
    {
      ...config,
      database: { kind: 'sqlite', url: ':memory:', poolMax: 1 },
      auth: { ...config.auth, secretKeyFile: undefined },
    },
    { logger: false },
  );
  await service.app.ready();
  process.stdout.write(`${JSON.stringify(service.app.swagger(), null, 2)}\n`);
  await service.close();
  return 0;
}

/** `create-admin --username NAME --email ADDRESS`, password from ADMIN_PASSWORD or the first line of stdin. */
async function createAdmin(config: Config, username: string | undefined, email: string | undefined): Promise<number> {
  if (username === undefined || email === undefined) {
    process.stderr.write(`create-admin needs --username and --email\n\n${commandHelp('create-admin')}`);
    return EX_USAGE;
  }
  const password = config.auth.admin.password ?? (await readPasswordLine());
  if (password === undefined) {
    process.stderr.write('no password: set ADMIN_PASSWORD or pass it on stdin\n');
    return EX_USAGE;
  }
  const { compose } = await import('./composition/compose.js');
  // The API's parts without its background work (consumers, flushes, pruning): a user is all it writes.
  const service = await compose({ ...config, role: 'api' }, { logger: false, background: false });
  try {
    const user = await service.auth.createUser({ username, email, password }, 'admin');
    process.stdout.write(`administrator ${user.username} created (id ${user.id})\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    process.stderr.write(`${error.detail}\n`);
    return 1;
  } finally {
    await service.close();
  }
}

async function readPasswordLine(): Promise<string | undefined> {
  if (process.stdin.isTTY) process.stderr.write('Password: ');
  const lines = createInterface({ input: process.stdin, terminal: false });
  for await (const line of lines) {
    lines.close();
    return line;
  }
  return undefined;
}

// Before the commands import the service's modules (see above), so that they are read compiled.
enableCompileCache();

main(process.argv.slice(2)).then(
  (code) => {
    // A failure exits at once: what a failed start left open (reconnecting clients) must not hold the process.
    if (code > 0) process.exit(code);
    if (code === 0) process.exitCode = 0;
  },
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
