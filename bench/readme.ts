/**
 * `node --import tsx bench/readme.ts`: writes bench/results/latest.svg and the results section of
 * bench/README.md from bench/results/latest.json (what `npm run bench` does itself after a run of
 * every scenario).
 */
import { join } from 'node:path';
import { ROOT } from './lib/processes.js';
import { writeResultsDocs } from './lib/readme.js';

for (const line of writeResultsDocs(join(ROOT, 'bench', 'results', 'latest.json'), { readme: true })) {
  process.stdout.write(`${line}\n`);
}
