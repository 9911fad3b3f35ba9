import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { Type } from 'typebox';
import { exportText, type LinkFileFormat, readLinkRows } from '../../adapters/transfer/link-files.js';
import { errors } from '../../domain/errors.js';
import { IMPORT_MAX_ROWS, TRANSFER_COLUMNS } from '../../domain/link-transfer.js';
import { LinkTransferService } from '../../services/link-transfer-service.js';
import { callerOf } from '../caller.js';
import { errorResponse } from '../schemas.js';

export interface LinkTransferRoutesOptions {
  readonly transfer: LinkTransferService;
  /** IMPORT_BODY_LIMIT: the largest import body, in bytes. */
  readonly importBodyLimit: number;
}

const tags = ['url_mapping'];

const MEDIA_TYPES: Readonly<Record<LinkFileFormat, string>> = {
  csv: 'text/csv; charset=utf-8',
  json: 'application/json; charset=utf-8',
};

const RowOutcome = Type.Object({
  row: Type.Integer({ description: 'The data row, counted from 1 (the CSV header row is not one).' }),
  code: Type.Union([Type.String(), Type.Null()], { description: 'The code the row gives; null when it gives none.' }),
  status: Type.Union([Type.Literal('created'), Type.Literal('taken'), Type.Literal('refused')]),
  detail: Type.Optional(Type.String({ description: 'Why the row was not created.' })),
});

const ImportReport = Type.Object({
  dry_run: Type.Boolean(),
  totals: Type.Object({
    rows: Type.Integer(),
    created: Type.Integer(),
    taken: Type.Integer(),
    refused: Type.Integer(),
  }),
  rows: Type.Array(RowOutcome, { description: 'One outcome per data row, in row order.' }),
  detail: Type.Optional(
    Type.String({
      description:
        'Only when the database failed part-way: where the import stopped. Rows reported `created` are stored; the rows after them were not written (refused, `not imported`), except that the batch being written as the database failed was, if the connection dropped as it committed (its answer lost): imported again, its rows show as taken.',
    }),
  ),
});

const LinkFields = {
  code: Type.String({ description: '6 to 10 letters and digits.' }),
  url: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  click_count: Type.Integer({ minimum: 0 }),
  expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  max_visits: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
};

const signedIn = {
  401: errorResponse('`Not authenticated`.'),
  403: errorResponse('A CSRF failure (cookie sessions only).'),
};

const columns = TRANSFER_COLUMNS.join(', ');

const exportSchema = {
  operationId: 'export_links',
  summary: "Export the caller's links (all of them for administrators) as CSV or JSON",
  description: `Streamed in id order, read a page at a time. CSV: a header row \`${TRANSFER_COLUMNS.join(',')}\`, then a link a row; JSON: an array of objects with the keys ${columns}. The format is \`format\`'s, else \`Accept: text/csv\` asks for CSV; JSON by default.`,
  tags,
  querystring: Type.Object({
    format: Type.Optional(Type.Union([Type.Literal('csv'), Type.Literal('json')])),
  }),
  produces: ['application/json', 'text/csv'],
  response: {
    200: {
      description: 'The links (CSV or JSON).',
      content: {
        'application/json': {
          schema: Type.Array(Type.Object(LinkFields)),
        },
        'text/csv': { schema: Type.String() },
      },
    },
    401: signedIn[401],
  },
};

const importSchema = {
  operationId: 'import_links',
  summary: 'Import links from CSV or JSON (up to 100,000 rows), owned by the caller',
  description: `Body \`text/csv\` (a header row naming the columns, \`code\` and \`url\` required, the others of ${columns} optional) or \`application/json\` (an array of objects with those keys). Each row is checked by the rules of the create routes; a code taken (in the database, or by an earlier row of the file) is \`taken\`. \`created_at\` (default now) and \`click_count\` (default 0) are kept as given. Written in batches, each created link with its \`url.created\` event. \`dry_run=true\` checks every row and writes nothing.`,
  tags,
  querystring: Type.Object({
    dry_run: Type.Optional(Type.Boolean({ default: false })),
  }),
  body: {
    // Documentation only: the body is read as a stream and checked a row at a time (each row's
    // mistakes are in the report, not a 422 of the whole body).
    content: {
      'application/json': {
        schema: Type.Array(
          Type.Object({
            code: LinkFields.code,
            url: LinkFields.url,
            created_at: Type.Optional(LinkFields.created_at),
            click_count: Type.Optional(LinkFields.click_count),
            expires_at: Type.Optional(LinkFields.expires_at),
            max_visits: Type.Optional(LinkFields.max_visits),
          }),
        ),
      },
      'text/csv': {
        schema: Type.String({ description: `A header row naming the columns (of ${columns}), then a link a row.` }),
      },
    },
  },
  response: {
    200: { ...ImportReport, description: 'The report: one outcome per row.' },
    ...signedIn,
    413: errorResponse(`More than ${IMPORT_MAX_ROWS} rows, or a body over IMPORT_BODY_LIMIT: nothing was imported.`),
    415: errorResponse('The body is neither `text/csv` nor `application/json`.'),
    422: errorResponse('The file cannot be read as its format (malformed JSON, a CSV header without `code`…).'),
  },
};

/** The export's format: `format`, else `Accept: text/csv`, else JSON. */
function exportFormat(request: FastifyRequest, format: LinkFileFormat | undefined): LinkFileFormat {
  if (format) return format;
  return /\btext\/csv\b/i.test(request.headers.accept ?? '') ? 'csv' : 'json';
}

/** The body's bytes as they arrive; IMPORT_TOO_LARGE (413) once they pass `limit`. */
async function* limitedBody(request: FastifyRequest, limit: number): AsyncGenerator<Buffer> {
  let bytes = 0;
  for await (const chunk of request.body as Readable) {
    bytes += (chunk as Buffer).length;
    if (bytes > limit) {
      request.raw.resume(); // the rest is read and dropped, so that the answer reaches the client
      throw errors.importTooLarge(limit);
    }
    yield chunk as Buffer;
  }
}

/**
 * `GET /links/export` and `POST /links/import` under `/api/v1` (README "Import and export"): a
 * plugin of its own, because the import reads its body as a stream (CSV or JSON), parsed as it
 * arrives, and these parsers must not reach any other route.
 */
export const linkTransferRoutes: FastifyPluginAsyncTypebox<LinkTransferRoutesOptions> = async (
  app,
  { transfer, importBodyLimit },
) => {
  const compile = app.validatorCompiler!; // the app's (see createSchemaCompilers)
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(['text/csv', 'application/json'], (_request, payload, done) => done(null, payload));

  app.get('/links/export', { config: { auth: 'user' }, schema: exportSchema }, async (request, reply) => {
    const format = exportFormat(request, request.query.format);
    const records = transfer.exportLinks(LinkTransferService.ownerScope(callerOf(request)));
    return reply
      .type(MEDIA_TYPES[format])
      .header('content-disposition', `attachment; filename="links.${format}"`)
      .send(Readable.from(exportText(records, format)) as never);
  });

  app.post(
    '/links/import',
    {
      config: { auth: 'user', rateLimit: 'writes' },
      schema: importSchema,
      // The schema documents the body; the rows are checked one by one as they are read.
      validatorCompiler: (route) => (route.httpPart === 'body' ? () => true : compile(route)),
    },
    async (request) => {
      const declared = Number(request.headers['content-length'] ?? 0);
      if (declared > importBodyLimit) {
        request.raw.resume();
        throw errors.importTooLarge(importBodyLimit);
      }
      const format: LinkFileFormat = /^text\/csv\b/i.test(request.headers['content-type'] ?? '') ? 'csv' : 'json';
      const rows = readLinkRows(limitedBody(request, importBodyLimit), format);
      return transfer.importLinks(rows, {
        owner: callerOf(request).userId,
        dryRun: request.query.dry_run === true,
        maxRows: IMPORT_MAX_ROWS,
      });
    },
  );
};
