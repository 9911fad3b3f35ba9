/**
 * The lint rule that keeps the inner layers on ports (eslint.config.js): an import of an adapter
 * or of the HTTP layer from domain/, ports/, services/ or consumers/ is an error; the same import
 * from the composition, or a port import from a service, is not.
 */
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const eslint = new ESLint({ cwd: new URL('../..', import.meta.url).pathname });

/** The messages of the layer rule for `source` as if it were the file `filePath`. */
async function layerErrors(filePath: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(source, { filePath });
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

describe('the inner layers import ports, never adapters or http/', () => {
  it.each([
    ['src/services/bad.ts', "import { JwtCodec } from '../adapters/auth/jwt.js';\nexport const codec = JwtCodec;\n"],
    [
      'src/consumers/bad.ts',
      "import type { EventTables } from '../adapters/storage/schema.js';\nexport type T = EventTables;\n",
    ],
    ['src/domain/bad.ts', "export { errorHandler } from '../http/error-handler.js';\n"],
    [
      'src/ports/bad.ts',
      "import type { Database } from '../adapters/storage/database.js';\nexport type D = Database;\n",
    ],
    ['src/services/nested/bad.ts', "import '../../http/plugins/csrf.js';\n"],
  ])('%s importing past the ports fails', async (filePath, source) => {
    const messages = await layerErrors(filePath, source);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(/depend on ports only/);
  });

  it.each([
    [
      'src/services/good.ts',
      "import type { TokenCodec } from '../ports/token-codec.js';\nexport type C = TokenCodec;\n",
    ],
    ['src/services/good.ts', "import { fetchPage } from '../support/paging.js';\nexport const page = fetchPage;\n"],
    ['src/consumers/good.ts', "import http from 'node:http';\nexport const server = http.createServer;\n"],
    [
      'src/composition/good.ts',
      "import { JwtCodec } from '../adapters/auth/jwt.js';\nexport const codec = JwtCodec;\n",
    ],
    ['src/http/good.ts', "import { JwtCodec } from '../adapters/auth/jwt.js';\nexport const codec = JwtCodec;\n"],
  ])('%s with an allowed import passes', async (filePath, source) => {
    expect(await layerErrors(filePath, source)).toEqual([]);
  });

  it('holds for the code as it is', async () => {
    const results = await eslint.lintFiles(['src/domain', 'src/ports', 'src/services', 'src/consumers']);
    const broken = results.flatMap((r) =>
      r.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => `${r.filePath}:${m.line}`),
    );
    expect(broken).toEqual([]);
  });
});
