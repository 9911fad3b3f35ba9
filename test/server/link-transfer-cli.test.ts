/**
 * `urlshortener export` and `urlshortener import` (issue 15 item 4) as real processes of the built
 * command line (`npm run build`), on both backends: the report of each row not created, the
 * totals, progress lines on a standard error that is not a terminal, owners, dry runs, and two
 * imports of overlapping files running at once in two processes.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BACKENDS, useTestDatabase } from '../helpers/backends.js';
import { storedLinks } from '../helpers/link-transfer.js';
import { createdInLog } from '../helpers/outbox-census.js';

const ROOT = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'urlshortener-transfer-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The built CLI with `args`, stdout and stderr apart (neither a terminal). */
function cli(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'dist', 'cli.js'), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const write = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe('--help', () => {
  it.each([
    [['export', '--help'], 'export [--format csv|json] [--out FILE] [--owner USERNAME]'],
    [['import', '--help'], 'import FILE [--dry-run] [--format csv|json] [--owner USERNAME]'],
    [['help', 'import'], 'import FILE [--dry-run] [--format csv|json] [--owner USERNAME]'],
  ])('%j prints the usage and exits 0', async (args, usage) => {
    const run = await cli(args, { DATABASE_URL: `sqlite:${join(dir, 'help.db')}` });
    expect(run.code).toBe(0);
    expect(run.stdout.startsWith(`usage: urlshortener ${usage}\n`), run.stdout).toBe(true);
  });

  it('says what is wrong with the arguments: exit 64', async () => {
    const env = { DATABASE_URL: `sqlite:${join(dir, 'usage.db')}` };
    expect((await cli(['import'], env)).stderr).toMatch(/^import needs the FILE to read/);
    expect((await cli(['import', join(dir, 'links.txt')], env)).stderr).toMatch(/give --format csv or --format json/);
    expect((await cli(['export', '--format', 'xml'], env)).code).toBe(64);
    const missing = await cli(['import', join(dir, 'nowhere.csv')], env);
    expect(missing.code).toBe(66);
    expect(missing.stderr).toMatch(/^cannot read .*nowhere\.csv/);
  });
});

describe.each(BACKENDS)('urlshortener import and export on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const database = useTestDatabase(backend);
  const env = () => ({ DATABASE_URL: database.databaseUrl, ADMIN_PASSWORD: 'cli admin password 1' });

  test('import prints each row not created and the totals, with progress lines; export writes them back', async () => {
    const file = write(
      `mixed-${backend.name}.csv`,
      'code,url,created_at,click_count,expires_at,max_visits\n' +
        'clgood01,https://example.com/1,2021-01-02T03:04:05Z,12,,\n' +
        'clgood02,https://example.com/2,,,2030-01-01T00:00:00Z,3\n' +
        'clgood01,https://example.com/again,,,,\n' +
        'bad,https://example.com/b,,,,\n' +
        'clbadurl,ftp://example.com/x,,,,\n',
    );
    const dry = await cli(['import', file, '--dry-run'], env());
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toBe(
      'row 3 clgood01: taken: the code is taken by row 1 of this file\n' +
        "row 4 bad: refused: 'code' must be 6 to 10 letters and digits\n" +
        "row 5 clbadurl: refused: 'url' scheme must be one of http, https\n" +
        'dry run, nothing written: would create 2, taken 1, refused 2 of 5 rows\n',
    );
    expect(dry.stderr).toMatch(/^checking: 100% \(5 rows in [\d.]+ s, [\d,]+ rows\/s, CPU [\d.]+ s\)\n$/m);
    expect((await storedLinks(database.databaseUrl, 'cl')).size).toBe(0);

    const run = await cli(['import', file], env());
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.split('\n').at(-2)).toBe('created 2, taken 1, refused 2 of 5 rows');
    expect(run.stderr).not.toMatch(/\r/); // not a terminal: plain lines
    expect(run.stderr).toMatch(/^importing: 100% \(5 rows/m);
    const stored = await storedLinks(database.databaseUrl, 'cl');
    expect([...stored.keys()].sort()).toEqual(['clgood01', 'clgood02']);
    expect(stored.get('clgood01')).toMatchObject({ created_at: '2021-01-02T03:04:05Z', click_count: 12, owner: null });
    const events = await createdInLog(database.databaseUrl);
    expect(events.get('clgood01')).toHaveLength(1);
    expect(events.get('clgood02')).toHaveLength(1);

    const out = join(dir, `export-${backend.name}.json`);
    const exported = await cli(['export', '--out', out], env());
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stderr).toMatch(/^exporting: 100% \(2 links/m);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual([
      {
        code: 'clgood01',
        url: 'https://example.com/1',
        created_at: '2021-01-02T03:04:05Z',
        click_count: 12,
        expires_at: null,
        max_visits: null,
      },
      {
        code: 'clgood02',
        url: 'https://example.com/2',
        created_at: expect.any(String),
        click_count: 0,
        expires_at: '2030-01-01T00:00:00Z',
        max_visits: 3,
      },
    ]);
    const csv = await cli(['export', '--format', 'csv'], env());
    expect(csv.stdout.split('\r\n').slice(0, 2)).toEqual([
      'code,url,created_at,click_count,expires_at,max_visits',
      'clgood01,https://example.com/1,2021-01-02T03:04:05Z,12,,',
    ]);
  });

  it.skipIf(!backend.available || !existsSync('/usr/bin/script'))(
    'on a terminal the progress is a bar redrawn in place',
    () => {
      const file = write(`tty-${backend.name}.csv`, 'code,url\ncltty001,https://example.com/t\n');
      // `script` gives the command a terminal; the bar and its last line start with a carriage return.
      const run = spawnSync(
        '/usr/bin/script',
        ['-qec', `"${process.execPath}" dist/cli.js import "${file}"`, '/dev/null'],
        {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env() },
          encoding: 'utf8',
        },
      );
      expect(run.status, run.stdout).toBe(0);
      expect(run.stdout).toMatch(/\rimporting: 100% \(1 rows in [\d.]+ s/);
      expect(run.stdout).toContain('created 1, taken 0, refused 0 of 1 rows');
    },
    30_000,
  );

  test('--owner: the links belong to that user, and only theirs are exported', async () => {
    const admin = await cli(['create-admin', '--username', 'cliowner', '--email', 'cliowner@example.com'], env());
    expect(admin.code, admin.stdout + admin.stderr).toBe(0);
    const file = write(
      `owned-${backend.name}.json`,
      JSON.stringify([{ code: 'clown001', url: 'https://example.com/o' }]),
    );
    const run = await cli(['import', file, '--owner', 'cliowner'], env());
    expect(run.code, run.stderr).toBe(0);
    const owner = (await storedLinks(database.databaseUrl, 'clown')).get('clown001')!.owner;
    expect(owner).toEqual(expect.any(Number));
    const mine = await cli(['export', '--owner', 'cliowner'], env());
    expect((JSON.parse(mine.stdout) as { code: string }[]).map((l) => l.code)).toEqual(['clown001']);
    expect((await cli(['export', '--owner', 'nobody'], env())).stderr).toMatch(/^no user is called nobody/);
  });

  test('two imports of overlapping files at once, in two processes: each code created once, each report right', async () => {
    const code = (i: number) => `clc${String(i).padStart(6, '0')}`;
    const rows = (from: number, to: number) =>
      `code,url\n${Array.from({ length: to - from }, (_, k) => `${code(from + k)},https://example.com/c/${from + k}`).join('\n')}\n`;
    // 6,000 rows each, 3,000 of them in both: several batches each, interleaving.
    const a = write(`a-${backend.name}.csv`, rows(0, 6000));
    const b = write(`b-${backend.name}.csv`, rows(3000, 9000));
    const [runA, runB] = await Promise.all([cli(['import', a], env()), cli(['import', b], env())]);
    expect(runA.code, runA.stderr).toBe(0);
    expect(runB.code, runB.stderr).toBe(0);

    /** The codes each run reported taken (every row it printed), and so those it created. */
    const takenBy = (run: Run) =>
      new Set(
        run.stdout
          .split('\n')
          .filter((line) => line.startsWith('row '))
          .map((line) => {
            expect(line).toMatch(/^row \d+ clc\d{6}: taken: the code is taken$/);
            return line.split(' ')[2]!.slice(0, -1);
          }),
      );
    const takenA = takenBy(runA);
    const takenB = takenBy(runB);
    const createdA = Array.from({ length: 6000 }, (_, k) => code(k)).filter((c) => !takenA.has(c));
    const createdB = Array.from({ length: 6000 }, (_, k) => code(3000 + k)).filter((c) => !takenB.has(c));
    // Each code of the overlap: created by exactly one of them, taken for the other.
    for (let i = 3000; i < 6000; i++) expect(takenA.has(code(i)) !== takenB.has(code(i)), code(i)).toBe(true);
    expect(createdA.length + createdB.length).toBe(9000);
    expect(runA.stdout).toMatch(new RegExp(`created ${createdA.length}, taken ${takenA.size}, refused 0 of 6000 rows`));
    expect(runB.stdout).toMatch(new RegExp(`created ${createdB.length}, taken ${takenB.size}, refused 0 of 6000 rows`));

    // Counted against the database: every code stored once, with the URL of the run that created it; one event each.
    const stored = await storedLinks(database.databaseUrl, 'clc');
    expect(stored.size).toBe(9000);
    for (const c of [...createdA, ...createdB])
      expect(stored.get(c)?.url).toBe(`https://example.com/c/${Number(c.slice(3))}`);
    const events = await createdInLog(database.databaseUrl);
    const imported = [...events.entries()].filter(([c]) => c.startsWith('clc'));
    expect(imported).toHaveLength(9000);
    for (const [c, ids] of imported) expect(ids, c).toHaveLength(1);
  }, 120_000);
});
