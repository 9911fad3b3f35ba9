#!/usr/bin/env node
import { type Config, ConfigError, loadConfig, settingsMarkdown } from './config/config.js';
import { openDatabase } from './adapters/storage/database.js';
import { migrateToLatest } from './adapters/storage/migrations.js';
import { compose } from './composition-root.js';
import { serve } from './server.js';

const USAGE = `usage: urlshortener <command>

commands:
  serve               start the HTTP service (default)
  migrate             bring the database schema up to date and exit
  openapi             print the OpenAPI document
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
      await serve(config);
      return -1; // keep running
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
    case 'openapi': {
      // The document depends on the routes only: build them over a throw-away in-memory database.
      const service = await compose({ ...config, database: { kind: 'sqlite', url: ':memory:', poolMax: 1 } }, { logger: false });
      await service.app.ready();
      process.stdout.write(`${JSON.stringify(service.app.swagger(), null, 2)}\n`);
      await service.close();
      return 0;
    }
    default:
      process.stderr.write(`unknown command: ${command}\n\n${USAGE}`);
      return 64; // EX_USAGE
  }
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
