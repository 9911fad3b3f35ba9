import { createReadStream, createWriteStream, statSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  exportText,
  formatOfFileName,
  LINK_FILE_FORMATS,
  type LinkFileFormat,
  readLinkRows,
} from './adapters/transfer/link-files.js';
import type { Service } from './composition/compose.js';
import type { Config } from './config/config.js';
import { AppError } from './domain/errors.js';
import type { LinkRecord, RowOutcome } from './domain/link-transfer.js';
import { Progress } from './support/progress.js';

/** The options `export` and `import` take (see their `--help` in cli.ts). */
export interface TransferOptions {
  readonly format?: string;
  readonly out?: string;
  readonly owner?: string;
  readonly 'dry-run'?: boolean;
}

const EX_USAGE = 64;
const EX_DATAERR = 65;
const EX_NOINPUT = 66;
const EX_NOUSER = 67;

const say = (text: string) => process.stderr.write(`${text}\n`);

/** `--format`, else the file name's extension, else `fallback`; undefined after saying what is wrong. */
function formatFor(option: string | undefined, file: string | undefined, fallback?: LinkFileFormat) {
  if (option !== undefined) {
    const format = LINK_FILE_FORMATS.find((f) => f === option);
    if (!format) say(`--format must be one of ${LINK_FILE_FORMATS.join(', ')}`);
    return format;
  }
  const format = (file && formatOfFileName(file)) ?? fallback;
  if (!format) say(`cannot tell the format of ${file} from its name: give --format csv or --format json`);
  return format;
}

/**
 * The service without its event consumers (the database and the outbox are all an import and an
 * export need), its links owned by `owner` (a username) when given.
 */
async function withService(
  config: Config,
  owner: string | undefined,
  work: (service: Service, ownerId: number | undefined) => Promise<number>,
): Promise<number> {
  // Loaded here, not at the top: the arguments' errors (exit 64, 66) are told before the service's
  // modules load (over a second), as cli.ts does for the other commands.
  const [{ compose }, { KyselyUserRepository }] = await Promise.all([
    import('./composition/compose.js'),
    import('./adapters/storage/kysely-user-repository.js'),
  ]);
  const service = await compose({ ...config, role: 'api' }, { logger: false, background: false });
  try {
    let ownerId: number | undefined;
    if (owner !== undefined) {
      const user = await new KyselyUserRepository(service.database.db, service.database.dialect).findByUsername(owner);
      if (!user) {
        say(`no user is called ${owner}`);
        return EX_NOUSER;
      }
      ownerId = user.id;
    }
    return await work(service, ownerId);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    say(error.detail);
    return EX_DATAERR;
  } finally {
    await service.close();
  }
}

/** `export [--format csv|json] [--out FILE] [--owner USERNAME]`: every link (or a user's) to a file or stdout. */
export async function exportCommand(config: Config, options: TransferOptions): Promise<number> {
  const format = formatFor(options.format, options.out, 'json');
  if (!format) return EX_USAGE;
  return withService(config, options.owner, async (service, owner) => {
    const { db } = service.database;
    let query = db.selectFrom('url_mappings').select((eb) => eb.fn.countAll<number>().as('n'));
    if (owner !== undefined) query = query.where('owner_id', '=', owner);
    const total = Number((await query.executeTakeFirst())?.n ?? 0);
    const progress = new Progress(process.stderr, 'exporting', total, 'links');
    let links = 0;
    async function* counted(): AsyncGenerator<LinkRecord> {
      for await (const record of service.linkTransfer.exportLinks(owner)) {
        links++;
        if (links % 1000 === 0) progress.update(links, links);
        yield record;
      }
    }
    const output = options.out === undefined ? process.stdout : createWriteStream(options.out);
    await pipeline(Readable.from(exportText(counted(), format)), output, { end: options.out !== undefined });
    progress.done(links);
    return 0;
  });
}

/** `import FILE [--dry-run] [--format csv|json] [--owner USERNAME]`: the rows not created on stdout, then the totals. */
export async function importCommand(
  config: Config,
  file: string | undefined,
  options: TransferOptions,
): Promise<number> {
  if (file === undefined) {
    say('import needs the FILE to read');
    return EX_USAGE;
  }
  const format = formatFor(options.format, file);
  if (!format) return EX_USAGE;
  let size: number;
  try {
    size = statSync(file).size;
  } catch (error) {
    say(`cannot read ${file}: ${(error as Error).message}`);
    return EX_NOINPUT;
  }
  const dryRun = options['dry-run'] === true;
  return withService(config, options.owner, async (service, owner) => {
    const progress = new Progress(process.stderr, dryRun ? 'checking' : 'importing', size, 'rows');
    let bytes = 0;
    async function* counted(): AsyncGenerator<Buffer> {
      for await (const chunk of createReadStream(file!)) {
        bytes += (chunk as Buffer).length;
        yield chunk as Buffer;
      }
    }
    const report = await service.linkTransfer.importLinks(readLinkRows(counted(), format), {
      owner: owner ?? null,
      dryRun,
      onRow: (outcome: RowOutcome) => {
        if (outcome.status !== 'created') {
          process.stdout.write(`row ${outcome.row} ${outcome.code ?? '-'}: ${outcome.status}: ${outcome.detail}\n`);
        }
      },
      onProgress: (rows) => progress.update(bytes, rows),
    });
    const { totals } = report;
    progress.done(totals.rows);
    process.stdout.write(
      `${dryRun ? 'dry run, nothing written: would create' : 'created'} ${totals.created}, taken ${totals.taken}, refused ${totals.refused} of ${totals.rows} rows\n`,
    );
    if (report.detail === undefined) return 0;
    say(report.detail);
    return 1;
  });
}
