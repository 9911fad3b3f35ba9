import { existsSync, readdirSync, readFileSync } from 'node:fs';
import SQLite from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import { connectClient } from '../../bench/lib/datasets.js';
import { SEED_CREATED_AT, seedCodeOfKey, seedKeysSorted, seedMapping } from '../../bench/lib/codes.js';
import { LoadPhases } from '../../bench/lib/phases.js';
import { loadPostgres, loadSqlite } from '../../bench/lib/seed.js';
import { BACKENDS, type TestDatabase, testConfig } from '../helpers/backends.js';

const COUNT = 3_000;

/** The schema as `urlshortener migrate` leaves it, before the bench's loader fills it. */
async function migrate(databaseUrl: string): Promise<void> {
  const database = openDatabase(testConfig(databaseUrl).database);
  try {
    await migrateToLatest(database.db, database.dialect);
  } finally {
    await database.close();
  }
}

const sqliteFile = (databaseUrl: string) => databaseUrl.slice('sqlite:'.length);

/** Index names and definitions of url_mappings, and whether the search finds what it should. */
async function inspect(backend: 'sqlite' | 'postgres', databaseUrl: string) {
  const probe = seedMapping(1234);
  if (backend === 'sqlite') {
    const db = new SQLite(sqliteFile(databaseUrl), { readonly: true });
    try {
      return {
        rows: (db.prepare('SELECT count(*) AS n FROM url_mappings').get() as { n: number }).n,
        indexes: db
          .prepare(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'url_mappings' ORDER BY name",
          )
          .all(),
        found: db
          .prepare('SELECT rowid FROM url_mappings_search WHERE url LIKE ?')
          .all(`%${probe.code}%`)
          .map((r) => (r as { rowid: number }).rowid),
        indexedUpTo: (db.prepare('SELECT indexed_up_to AS n FROM url_mappings_search_state').get() as { n: number }).n,
        settings: db.prepare("SELECT k, v FROM url_mappings_search_config WHERE k <> 'version'").all(),
        idOfProbe: (
          db.prepare('SELECT id FROM url_mappings WHERE code = ?').get(probe.code) as { id: number } | undefined
        )?.id,
      };
    } finally {
      db.close();
    }
  }
  const client = await connectClient(databaseUrl);
  try {
    const rows = Number((await client.query('SELECT count(*) AS n FROM url_mappings')).rows[0].n);
    const { rows: indexes } = await client.query(
      `SELECT indexname AS name, regexp_replace(indexdef, ' ON \\S+\\.', ' ON ') AS sql FROM pg_indexes
       WHERE schemaname = current_schema() AND tablename = 'url_mappings' ORDER BY indexname`,
    );
    await client.query('SET enable_seqscan = off');
    const found = (await client.query('SELECT id FROM url_mappings WHERE url ILIKE $1', [`%${probe.code}%`])).rows.map(
      (r: { id: string }) => Number(r.id),
    );
    const probeRow = (await client.query('SELECT id FROM url_mappings WHERE code = $1', [probe.code])).rows[0];
    const idOfProbe = probeRow === undefined ? undefined : Number(probeRow.id);
    return { rows, indexes, found, idOfProbe };
  } finally {
    await client.end();
  }
}

describe.each(BACKENDS)("the bench's loader on $name", (backend) => {
  let databases: TestDatabase[] = [];
  afterEach(async () => {
    await Promise.all(databases.map((d) => d.drop()));
    databases = [];
  });
  const fresh = async () => {
    const database = await backend.create();
    databases.push(database);
    await migrate(database.databaseUrl);
    return database.databaseUrl;
  };

  it.skipIf(!backend.available)(
    'loads every seeded mapping and leaves the indexes and the search as the migrations make them',
    async () => {
      const migratedOnly = await inspect(backend.name, await fresh());
      const loaded = await fresh();
      const phases = new LoadPhases();
      if (backend.name === 'sqlite') {
        await loadSqlite(sqliteFile(loaded), COUNT, phases);
      } else {
        const client = await connectClient(loaded);
        try {
          await loadPostgres(client, COUNT, () => connectClient(loaded), phases);
        } finally {
          await client.end();
        }
      }
      const after = await inspect(backend.name, loaded);
      // Where the load's time went, a phase each; on PostgreSQL each index rebuilt after the COPY
      // (all but the unique ones), two at a time.
      const names = Object.keys(phases.record());
      if (backend.name === 'sqlite') {
        expect(names).toEqual(['inserts', 'search index (rest of its side build)', 'search index copy']);
      } else {
        const rebuilt = (after.indexes as { name: string; sql: string }[])
          .filter((i) => !/\bUNIQUE\b/i.test(i.sql))
          .map((i) => i.name);
        expect(rebuilt.length).toBeGreaterThan(2);
        expect([names[0], names.at(-1)]).toEqual(['copy', 'vacuum analyze']);
        expect(names.slice(1, -1).sort()).toEqual(rebuilt.sort());
      }
      expect(after.rows).toBe(COUNT);
      expect(after.indexes).toEqual(migratedOnly.indexes);
      // The probe's URL holds its code once: the search (FTS5 on SQLite, a trigram index on PostgreSQL) finds that row.
      expect(after.idOfProbe).toBeDefined();
      expect(after.found).toEqual([after.idOfProbe]);
      if (backend.name === 'sqlite') {
        expect(after.indexedUpTo).toBe(COUNT);
        // FTS5's merging as the service gets it: 'automerge' back at its default.
        expect(after.settings).toEqual([{ k: 'automerge', v: 4 }]);
        // The index (built in a file of its own and copied in) holds exactly the table's rows:
        // FTS5's integrity check (rank 1: against the content table) throws if they differ.
        const db = new SQLite(sqliteFile(loaded));
        try {
          expect(() =>
            db.exec("INSERT INTO url_mappings_search (url_mappings_search, rank) VALUES ('integrity-check', 1)"),
          ).not.toThrow();
          db.prepare('UPDATE url_mappings SET url = ? WHERE id = 7').run('https://example.org/changed');
          db.exec('DROP TRIGGER url_mappings_search_update'); // so the change reaches the table only
          db.prepare('UPDATE url_mappings SET url = ? WHERE id = 8').run('https://example.org/unindexed');
          expect(() =>
            db.exec("INSERT INTO url_mappings_search (url_mappings_search, rank) VALUES ('integrity-check', 1)"),
          ).toThrow(/malformed|corrupt/);
        } finally {
          db.close();
        }
      }
    },
    60_000,
  );
});

describe("the bench's SQLite loader failing", () => {
  const sqlite = BACKENDS.find((b) => b.name === 'sqlite')!;
  let database: TestDatabase | undefined;
  afterEach(async () => {
    await database?.drop();
    database = undefined;
  });

  /** Processes whose command line names `path`. */
  const processesNaming = (path: string) =>
    readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(path);
        } catch {
          return false; // gone meanwhile
        }
      });

  it('stops the search index side build and removes its file when the inserts fail', async () => {
    database = await sqlite.create();
    await migrate(database.databaseUrl);
    const file = sqliteFile(database.databaseUrl);
    // The first seeded code in the loader's order, already taken: its first insert fails.
    const db = new SQLite(file);
    try {
      const first = seedCodeOfKey(seedKeysSorted(COUNT)[0]!);
      db.prepare("INSERT INTO url_mappings (code, url, created_at) VALUES (?, 'https://example.com/', ?)").run(
        first,
        SEED_CREATED_AT,
      );
    } finally {
      db.close();
    }
    await expect(loadSqlite(file, COUNT)).rejects.toThrow(/UNIQUE/);
    expect(processesNaming(`${file}.search`)).toEqual([]);
    expect(existsSync(`${file}.search`)).toBe(false);
  }, 30_000);
});
