/** The settings of link import and export (README "Import and export"), spread into SETTINGS. */

import { IMPORT_MAX_ROWS } from '../domain/link-transfer.js';
import { integer } from './parsers.js';
import type { SettingDeclaration } from './setting-declaration.js';

export const TRANSFER_SETTINGS = {
  IMPORT_BODY_LIMIT: {
    default: String(64 * 1024 * 1024),
    description: `Largest body \`POST /api/v1/links/import\` reads, in bytes (it takes at most ${IMPORT_MAX_ROWS.toLocaleString('en')} rows); a larger one gets 413 and nothing is imported. BODY_LIMIT does not apply to it. \`urlshortener import\` has no limit.`,
    parse: integer(1024, 1024 * 1024 * 1024),
  },
} satisfies Record<string, SettingDeclaration>;
