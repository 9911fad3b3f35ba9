import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { VisitView } from '../../domain/visit.js';
import type { VisitStatsService } from '../../services/visit-stats-service.js';
import { callerOf } from '../caller.js';
import { CodeParams, errorResponse, ref } from '../schemas.js';
import { LinkStats, StatsQuery, VisitPage, VisitsQuery } from '../visit-schemas.js';

export interface LinkStatsRoutesOptions {
  readonly stats: VisitStatsService;
}

const tags = ['url_mapping'];
const DEFAULT_PAGE = 100;
export const VISITS_CSV_HEADER = 'visited_at,referrer_host,browser,os,device,bot,country';

const errorsOf = {
  401: errorResponse('`Not authenticated`.'),
  403: errorResponse('A CSRF failure (cookie sessions only).'),
  404: errorResponse('No link has this code, or the caller is neither its owner nor an administrator.'),
  422: errorResponse('A query parameter breaks its rule, or `from` is not before `to`.'),
};

const statsSchema = {
  operationId: 'link_stats',
  summary: "A link's visit statistics",
  description:
    'Totals, a time series and the top referrers, countries, browsers, operating systems and device classes, from rollups kept as visits are written (visits show up within VISIT_FLUSH_INTERVAL_MS, by default the click flush interval). For the owner and administrators.',
  tags,
  params: CodeParams,
  querystring: StatsQuery,
  response: { 200: { ...ref(LinkStats), description: 'The statistics.' }, ...errorsOf },
};

const visitsSchema = {
  operationId: 'link_visits',
  summary: "A link's visits, newest first",
  description: `One page of the raw visits (\`Link: <…>; rel="next"\` while more exist). With \`Accept: text/csv\`: CSV with the header row \`${VISITS_CSV_HEADER}\`, every visit in the range streamed when no \`limit\` is given. For the owner and administrators.`,
  tags,
  params: CodeParams,
  querystring: VisitsQuery,
  produces: ['application/json', 'text/csv'],
  response: {
    200: {
      description: 'The visits (JSON `VisitPage`, or CSV).',
      content: {
        'application/json': { schema: ref(VisitPage) },
        'text/csv': { schema: { type: 'string' } },
      },
    },
    ...errorsOf,
  },
};

/** A CSV field: quoted when it holds a comma, quote or line break. */
function csvField(value: string | boolean | null): string {
  if (value === null) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export function visitCsvLine(v: VisitView): string {
  return `${[v.visited_at, v.referrer_host, v.browser, v.os, v.device, v.bot, v.country].map(csvField).join(',')}\n`;
}

async function* csvLines(visits: AsyncIterable<VisitView> | Iterable<VisitView>) {
  yield `${VISITS_CSV_HEADER}\n`;
  for await (const visit of visits) yield visitCsvLine(visit);
}

const wantsCsv = (accept: string | undefined) => accept !== undefined && /\btext\/csv\b/i.test(accept);

/** `GET /api/v1/links/{code}/stats` and `GET /api/v1/links/{code}/visits` (issue 15). */
export const linkStatsRoutes: FastifyPluginAsyncTypebox<LinkStatsRoutesOptions> = async (app, { stats }) => {
  app.get('/links/:code/stats', { config: { auth: 'user' }, schema: statsSchema }, async (request) =>
    stats.stats(request.params.code, request.query, callerOf(request)),
  );

  app.get('/links/:code/visits', { config: { auth: 'user' }, schema: visitsSchema }, async (request, reply) => {
    const { code } = request.params;
    const caller = callerOf(request);
    const { from, to, cursor } = request.query;
    const csv = wantsCsv(request.headers.accept);
    if (csv && request.query.limit === undefined && cursor === undefined) {
      // Checked before the answer starts, so that a refusal is still a JSON error.
      await stats.authorise(code, caller);
      return reply.type('text/csv; charset=utf-8').send(Readable.from(csvLines(stats.all(code, { from, to }, caller))));
    }
    const limit = request.query.limit ?? DEFAULT_PAGE;
    const page = await stats.page(code, { from, to, limit, cursor }, caller);
    if (page.next_cursor !== null) {
      const params = new URLSearchParams({ limit: String(limit), cursor: page.next_cursor });
      if (from !== undefined) params.set(`from`, from);
      if (to !== undefined) params.set(`to`, to);
      void reply.header('link', `</api/v1/links/${code}/visits?${params.toString()}>; rel="next"`);
    }
    if (csv) return reply.type('text/csv; charset=utf-8').send(Readable.from(csvLines(page.items)));
    return page;
  });
};
