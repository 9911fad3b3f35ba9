// Drift check for the generated API types: regenerates them from ../docs/openapi.json and fails
// when src/lib/api-types.ts differs. Fix a failure with `npm run api-types` (after `npm run docs`).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const web = join(import.meta.dirname, '..');
const committed = join(web, 'src', 'lib', 'api-types.ts');
const dir = mkdtempSync(join(tmpdir(), 'api-types-'));
try {
  const fresh = join(dir, 'api-types.ts');
  const cli = join(web, 'node_modules', 'openapi-typescript', 'bin', 'cli.js');
  execFileSync(process.execPath, [cli, join(web, '..', 'docs', 'openapi.json'), '-o', fresh], { stdio: 'pipe' });
  if (readFileSync(fresh, 'utf8') !== readFileSync(committed, 'utf8')) {
    console.error(
      'web/src/lib/api-types.ts is out of date with docs/openapi.json: run `npm run api-types --prefix web`.',
    );
    process.exitCode = 1;
  } else {
    console.log('web/src/lib/api-types.ts matches docs/openapi.json');
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
