/**
 * `node --import tsx bench/lookups.ts FILE [READER_MMAP] [COMMIT_EVERY] [reader|writer]`: the
 * redirect's lookup by code, at random, on a loaded SQLite dataset (bench/.data/sqlite-10m.db:
 * copy it first, the commits change it), while a second connection commits a one-row UPDATE every
 * COMMIT_EVERY lookups (0: never), as the service's click and visit writes do. The lookups run on a
 * read-only connection with `mmap_size` READER_MMAP (default 0), or with `writer` on the committing
 * connection itself. Prints µs a lookup (commits included) and the process's user and system CPU.
 * What it showed is in PROFILE.md ("The uniform mix over 10,000,000 links: what the serving
 * thread waited for"): a connection that sees another's commits reads every page again.
 */
import SQLite from 'better-sqlite3';
import { seedMapping } from './lib/codes.js';

const [file, readerMmap = '0', every = '0', on = 'reader'] = process.argv.slice(2);
if (!file) throw new Error('usage: bench/lookups.ts FILE [READER_MMAP] [COMMIT_EVERY] [reader|writer]');
const LOOKUPS = 200_000;
const writer = new SQLite(file, { fileMustExist: true });
writer.pragma('journal_mode = WAL');
writer.pragma('synchronous = NORMAL');
writer.pragma('cache_size = -65536');
const reader = new SQLite(file, { readonly: true, fileMustExist: true });
reader.pragma(`mmap_size = ${Number(readerMmap)}`);
reader.pragma('cache_size = -65536');
const mappings = Number((writer.prepare('SELECT max(id) AS n FROM url_mappings').get() as { n: number }).n);
const lookup = (on === 'writer' ? writer : reader).prepare(
  'SELECT id, url, expires_at, max_visits, visits_used FROM url_mappings WHERE code = ?',
);
const update = writer.prepare('UPDATE url_mappings SET click_count = click_count + 1 WHERE id = ?');
const commitEvery = Number(every);
let state = 12345;
const codes = Array.from({ length: LOOKUPS }, () => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return seedMapping(state % mappings).code;
});
for (const pass of [1, 2]) {
  const started = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  let found = 0;
  codes.forEach((code, i) => {
    if (lookup.get(code)) found++;
    if (commitEvery > 0 && (i + 1) % commitEvery === 0) update.run(1 + (i % 1000));
  });
  const used = process.cpuUsage(cpu);
  const us = Number(process.hrtime.bigint() - started) / 1e3 / LOOKUPS;
  console.log(
    `pass ${pass}: ${us.toFixed(2)} µs a lookup on the ${on === 'writer' ? 'committing connection' : `reader (mmap ${readerMmap})`}, ` +
      `a commit every ${commitEvery || 'never'}; user ${(used.user / LOOKUPS).toFixed(2)} sys ${(used.system / LOOKUPS).toFixed(2)} µs; found ${found}/${LOOKUPS}`,
  );
}
