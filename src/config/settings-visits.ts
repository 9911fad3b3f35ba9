/** The settings of visit recording and statistics (issue 15), spread into SETTINGS after the click settings. */

import { boolean, integer, type Parser } from './parsers.js';
import type { SettingDeclaration } from './setting-declaration.js';

/** An interval in ms from 10 to 60,000, or undefined when empty (the click flush's then). */
const optionalFlushInterval: Parser<number | undefined> = (raw) =>
  raw.trim() === '' ? undefined : integer(10, 60_000)(raw);

/** A request header name (lower-cased, as Node gives them), or undefined when empty. */
const optionalHeaderName: Parser<string | undefined> = (raw) => {
  const name = raw.trim().toLowerCase();
  if (name === '') return undefined;
  return /^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name) ? name : { problem: 'must be a header name, or empty' };
};

export const VISIT_SETTINGS = {
  VISIT_RECORDING: {
    default: 'true',
    description:
      '`true`: every counted redirect records a visit (time, referrer host, browser, OS, device class, bot flag, country), buffered and written every `VISIT_FLUSH_INTERVAL_MS` (by default with the click flush); statistics come from them. `false`: nothing is recorded (the redirect path does what it did before).',
    parse: boolean,
  },
  VISIT_FLUSH_INTERVAL_MS: {
    default: '',
    description:
      'How often buffered visits are written to the visit journal, one row a flush (and at once when 100,000 are waiting); a `kill -9` loses at most this much of them. Empty: with the clicks, every `CLICK_FLUSH_INTERVAL_MS`. The journal is merged into one row per link every 5 s whatever this is, so a longer interval saves a journal row a flush, little else, at the price of statistics that lag by up to this much more and more visits lost to a crash.',
    parse: optionalFlushInterval,
  },
  VISIT_RETENTION_DAYS: {
    default: '365',
    description:
      'Visits older than this many days are deleted in the background (in batches, every `VISIT_RETENTION_INTERVAL_MS`), and with them the statistics of the days they fall in: the statistics always match the visits kept.',
    parse: integer(1, 36_500),
  },
  VISIT_RETENTION_INTERVAL_MS: {
    default: '60000',
    description:
      "How often each serving process runs retention. A run deletes at most 20,000 segments of old visits (a segment holds one link's visits of a few seconds), 1,000 a transaction: shorten it if old visits age out faster than that. Every instance runs it; what one deletes the others do not find.",
    parse: integer(100, 86_400_000),
  },
  VISIT_COUNTRY_HEADER: {
    default: '',
    description:
      "The request header a trusted proxy in front of the service sets to the client's ISO 3166-1 country code (`CF-IPCountry` behind Cloudflare, `CloudFront-Viewer-Country` behind CloudFront). Empty: no country is recorded. Set it only when every request passes that proxy, as a client could send the header itself.",
    parse: optionalHeaderName,
  },
  COUNT_BOTS: {
    default: 'true',
    description:
      '`true`: redirects for bots (by the `User-Agent`, through `isbot`) count in `click_count` as any other. `false`: they do not (their visits are still recorded, flagged as bots).',
    parse: boolean,
  },
} satisfies Record<string, SettingDeclaration>;
