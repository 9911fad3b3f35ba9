/** The settings of links and their owners (README "Links and their owners"), spread into SETTINGS. */

import { LINK_WRITE_POLICIES } from '../domain/settings.js';
import { CODE_MAX_LENGTH, CODE_MIN_LENGTH } from '../domain/url-mapping.js';
import { integer, oneOf } from './parsers.js';
import type { SettingDeclaration } from './setting-declaration.js';

export const LINK_SETTINGS_DECLARATIONS = {
  CODE_LENGTH: {
    default: '7',
    description: `Length of the codes \`POST /api/v1/links\` generates when none is given (${CODE_MIN_LENGTH} to ${CODE_MAX_LENGTH} letters and digits).`,
    parse: integer(CODE_MIN_LENGTH, CODE_MAX_LENGTH),
  },
  LINK_WRITE_POLICY: {
    default: 'open',
    description:
      "`open`: anyone may create links and change or delete the anonymous ones (spec §4), a signed-in user's links only they and administrators; `owned`: creating needs a signed-in user, anonymous changes answer 401 and `GET /urls` lists the caller's own links (all for administrators). Administrators change it at runtime (`link_write_policy`).",
    parse: oneOf(LINK_WRITE_POLICIES),
  },
} satisfies Record<string, SettingDeclaration>;
