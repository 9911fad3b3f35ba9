/**
 * `node --import tsx bench/lib/seed-search.ts FILE COUNT DEFINITION`: builds the search index
 * (migration 0061's FTS5 table, created by DEFINITION: its `CREATE VIRTUAL TABLE` as the migrated
 * database holds it) of the first COUNT seeded mappings, inserted in code order as `loadSqlite`
 * inserts them (so the row of the i-th is i + 1), into FILE, a database of its own. The loader runs
 * it on the other core while it inserts the mappings, then copies its tables in (`loadSqlite`).
 */
import { pathToFileURL } from 'node:url';
import SQLite from 'better-sqlite3';
import { seedCodeOfKey, seedKeysSorted, seedUrl } from './codes.js';

export function buildSearch(file: string, count: number, definition: string): void {
  const keys = seedKeysSorted(count);
  const db = new SQLite(file);
  try {
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -262144');
    db.exec(definition);
    // No merging while writing ('automerge' 0), then one 'optimize': at 10,000,000 rows a build
    // that merged as it went took 82 s, this one 57 + 11 on the same machine.
    db.exec(`INSERT INTO url_mappings_search (url_mappings_search, rank) VALUES ('automerge', 0)`);
    const insert = db.prepare('INSERT INTO url_mappings_search (rowid, code, url) VALUES (?, ?, ?)');
    db.transaction(() => {
      for (let i = 0; i < count; i++) {
        const code = seedCodeOfKey(keys[i]!);
        insert.run(i + 1, code, seedUrl(code));
      }
    })();
    db.exec("INSERT INTO url_mappings_search (url_mappings_search) VALUES ('optimize')");
  } finally {
    db.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [file, count, definition] = process.argv.slice(2);
  buildSearch(file!, Number(count), definition!);
}
