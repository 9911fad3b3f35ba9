import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { compose } from '../../src/composition/compose.js';
import { settingsMarkdown } from '../../src/config/config.js';
import { testConfig } from '../helpers/backends.js';
import { layoutDrift, layoutEntries, layoutMarkdown } from '../../scripts/layout.js';
import { blockOf, END, LAYOUT_END, LAYOUT_START, START } from '../../scripts/update-readme.js';

/** Generated documents must match the code: run `npm run docs` after changing routes or settings. */
describe('generated documents', () => {
  it('README.md carries the current configuration table', () => {
    const readme = readFileSync('README.md', 'utf8');
    expect(blockOf(readme, START, END), 'run `npm run docs`').toBe(settingsMarkdown());
  });

  it('scripts/layout.ts describes every folder there is, and none that is gone', () => {
    expect(layoutDrift(layoutEntries()), 'add or drop its line in scripts/layout.ts').toEqual({
      undescribed: [],
      gone: [],
    });
  });

  it('README.md carries the current layout', () => {
    const readme = readFileSync('README.md', 'utf8');
    expect(blockOf(readme, LAYOUT_START, LAYOUT_END), 'run `npm run docs`').toBe(layoutMarkdown());
  });

  it('docs/openapi.json is the document the app serves', async () => {
    const service = await compose(testConfig('sqlite::memory:'), { logger: false });
    try {
      await service.app.ready();
      const served = service.app.swagger();
      const committed: unknown = JSON.parse(readFileSync('docs/openapi.json', 'utf8'));
      expect(committed, 'run `npm run docs`').toEqual(JSON.parse(JSON.stringify(served)));
    } finally {
      await service.close();
    }
  });
});
