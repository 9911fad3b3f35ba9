#!/usr/bin/env node
import { type Config, ConfigError, loadConfig, ROLES, type Role, settingsMarkdown } from './config/config.js';
import { openDatabase } from './adapters/storage/database.js';
import { migrateToLatest } from './adapters/storage/migrations.js';
import { compose } from './composition/compose.js';
import { serve } from './server.js';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { AppError } from './domain/errors.js';

const USAGE = `usage: urlshortener <command>

commands:
  serve [--role all|api|worker]
                      start the service (default role: ROLE, or all): the HTTP API,
                      the event consumers, or both
  migrate             bring the database schema up to date and exit
  openapi             print the OpenAPI document
  create-admin --username NAME --email ADDRESS
                      create an administrator; the password comes from ADMIN_PASSWORD or stdin
  config --markdown   print the configuration table
`;

async function main(argv: readonly string[]): Promise<number> {
  const [command = 'serve', ...rest] = argv;
  if (command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === 'config' && rest.includes('--markdown')) {
    process.stdout.write(`${settingsMarkdown()}\n`);
    return 0;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 78; // EX_CONFIG
    }
    throw error;
  }
  switch (command) {
    case 'serve':
      return serveCommand(config, rest);
    case 'migrate': {
      const database = openDatabase(config.database);
      try {
        const { applied } = await migrateToLatest(database.db, database.dialect);
        process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n');
      } finally {
        await database.close();
      }
      return 0;
    }
    case 'openapi':
      return printOpenApi(config);
    case 'create-admin':
      return createAdmin(config, rest);
    default:
      process.stderr.write(`unknown command: ${command}\n\n${USAGE}`);
      return 64; // EX_USAGE
  }
}

/** `serve [--role all|api|worker]`: runs until a signal stops it. */
async function serveCommand(config: Config, args: readonly string[]): Promise<number> {
  const { values } = parseArgs({ args: [...args], options: { role: { type: 'string' } }, strict: true });
  const role = values.role ?? config.role;
  if (!(ROLES as readonly string[]).includes(role)) {
    process.stderr.write(`--role must be one of ${ROLES.join(', ')}\n`);
    return 64;
  }
  await serve({ ...config, role: role as Role });
  return -1; // keep running
}

/** The document depends on the routes only: they are built over a throw-away in-memory database. */
async function printOpenApi(config: Config): Promise<number> {
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
async function createAdmin(config: Config, args: readonly string[]): Promise<number> {
  let username: string | undefined;
  let email: string | undefined;
  try {
    const { values } = parseArgs({
      args: [...args],
      options: { username: { type: 'string' }, email: { type: 'string' } },
      strict: true,
    });
    ({ username, email } = values);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}`);
    return 64; // EX_USAGE
  }
  if (username === undefined || email === undefined) {
    process.stderr.write(`create-admin needs --username and --email\n\n${USAGE}`);
    return 64;
  }
  const password = config.auth.admin.password ?? (await readPasswordLine());
  if (password === undefined) {
    process.stderr.write('no password: set ADMIN_PASSWORD or pass it on stdin\n');
    return 64;
  }
  const service = await compose(config, { logger: false });
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

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
