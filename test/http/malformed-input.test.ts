/**
 * Every operation in the OpenAPI document, sent malformed input by a signed-in administrator
 * (session cookie and CSRF token): each path and query parameter in turn set to odd text (empty,
 * huge, control characters, lone surrogates, percent signs, numbers past 2^53, dates that are not
 * dates), and each body replaced by JSON of the wrong shape, with each of its properties in turn
 * given a value of another type or an odd one, unknown properties, or text that is not JSON. The
 * service never answers 5xx, and every answer of 400 and above is JSON with a `{detail}`.
 *
 * The cases come from a seeded generator, the same ones every run (`MALFORMED_SEED` picks others).
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS } from '../helpers/backends.js';
import { expectError } from '../helpers/http.js';
import { answerFault } from '../helpers/http-client.js';
import { seededRandom } from '../../bench/lib/codes.js';
import openapi from '../../docs/openapi.json' with { type: 'json' };

/** What the cases read of a JSON schema: a reference, or the fields of an object or of an array's items. */
type Schema = {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  items?: Schema;
};
interface Operation {
  readonly method: string;
  readonly path: string;
  readonly parameters: readonly { name: string; in: 'path' | 'query' | 'header' }[];
  readonly bodies: Readonly<Record<string, { schema?: Schema }>>;
}

const ADMIN = { username: 'malformed', email: 'malformed@example.com', password: 'correct horse battery staple' };
const SEED = Number(process.env.MALFORMED_SEED ?? 20261202);
/** Cases per operation besides the one per parameter and property. */
const RANDOM_CASES = 12;

const TEXTS: readonly string[] = [
  '',
  ' ',
  '0',
  '-1',
  '1.5',
  '1e309',
  '9'.repeat(30),
  String(2 ** 53 + 2),
  'NaN',
  'null',
  'true',
  '[]',
  '{}',
  '%',
  '%00',
  '%zz',
  '..',
  '../../etc/passwd',
  '\u0000',
  '\u0007\u001b[31m',
  '\ud800',
  'ü'.repeat(40),
  '😀',
  'x'.repeat(70_000),
  "' or 1=1 --",
  '2024-13-45T99:99:99Z',
  '2024-02-30',
  '-271821-04-20T00:00:00Z',
  'javascript:alert(1)',
  'http://[::1',
  'http://' + 'a'.repeat(5000) + '.com',
];
const VALUES: readonly unknown[] = [
  ...TEXTS.filter((_, i) => i % 3 === 0),
  0,
  -1,
  1.5,
  2 ** 53 + 2,
  1e308,
  true,
  false,
  null,
  [],
  [1, 'a'],
  {},
  { nested: { deeper: [null] } },
];

const text = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));
const csvCell = (value: unknown) => `"${text(value).replaceAll('"', '""')}"`;

/** A body's fields as each media type the operations take carries them (an array: rows). */
const ENCODERS: Readonly<Record<string, (fields: unknown) => string>> = {
  'application/json': (fields) => JSON.stringify(fields),
  'application/x-www-form-urlencoded': (fields) =>
    new URLSearchParams(
      Object.entries(fields as Record<string, unknown>).map(([k, v]): [string, string] => [k, text(v)]),
    ).toString(),
  'text/csv': (fields) => {
    const rows = fields as Record<string, unknown>[];
    const columns = Object.keys(rows[0] ?? {});
    return [columns.join(','), ...rows.map((row) => columns.map((c) => csvCell(row[c])).join(','))].join('\n');
  },
};

/** Sent to every parameter, besides the random picks: the edges of numbers and of text. */
const SHARP: readonly string[] = ['', '-1', '1.5', '9'.repeat(30), String(2 ** 63), 'x'.repeat(5000), '%'];

/** Picks from lists, and numbers in [0, 1), from a seeded sequence: a failure can be run again as it was. */
function generator(seed: number) {
  const next = seededRandom(seed);
  return { pick: <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)]!, next };
}

function resolve(schema: Schema | undefined): Schema | undefined {
  if (!schema?.$ref) return schema;
  const name = schema.$ref.replace('#/components/schemas/', '');
  return resolve((openapi as { components: { schemas: Record<string, Schema> } }).components.schemas[name]);
}

function operations(): Operation[] {
  const found: Operation[] = [];
  for (const [path, methods] of Object.entries(openapi.paths as Record<string, Record<string, unknown>>)) {
    for (const [method, value] of Object.entries(methods)) {
      const op = value as {
        parameters?: Operation['parameters'];
        requestBody?: { content?: Operation['bodies'] };
        responses?: unknown;
      };
      if (!op.responses) continue;
      found.push({
        method: method.toUpperCase(),
        path,
        parameters: op.parameters ?? [],
        bodies: op.requestBody?.content ?? {},
      });
    }
  }
  return found;
}

/** What a case sends: its path with the parameters filled in, its query, and its body. */
interface Case {
  readonly label: string;
  readonly params: Record<string, string>;
  readonly query: Record<string, string>;
  readonly body?: { readonly type: string; readonly text: string };
}

function cases(op: Operation, random: ReturnType<typeof generator>): Case[] {
  const pathParams = op.parameters.filter((p) => p.in === 'path').map((p) => p.name);
  const queryParams = op.parameters.filter((p) => p.in === 'query').map((p) => p.name);
  const plain = Object.fromEntries(pathParams.map((name) => [name, 'abc']));
  const made: Case[] = [];
  for (const name of pathParams) {
    for (const text of [...SHARP, random.pick(TEXTS), random.pick(TEXTS)]) {
      made.push({
        label: `path ${name}=${JSON.stringify(text.slice(0, 40))}`,
        params: { ...plain, [name]: text },
        query: {},
      });
    }
  }
  for (const name of [...queryParams, 'unknown']) {
    for (const text of [...SHARP, random.pick(TEXTS), random.pick(TEXTS)]) {
      made.push({
        label: `query ${name}=${JSON.stringify(text.slice(0, 40))}`,
        params: plain,
        query: { [name]: text },
      });
    }
  }
  // The fields of a body: its JSON schema's properties (of its items, for an array of rows), which
  // a form or a CSV file carries too.
  const json = resolve(op.bodies['application/json']?.schema);
  const rows = json?.type === 'array';
  const item = rows ? resolve(json.items) : json;
  const properties = Object.keys(item?.properties ?? {});
  for (const type of Object.keys(op.bodies)) {
    const encode = ENCODERS[type];
    if (!encode) throw new Error(`no encoder for ${type}`);
    const body = (fields: Record<string, unknown>) => ({ type, text: encode(rows ? [fields] : fields) });
    const texts =
      type === 'application/json' ? ['{', '{"a":', 'nul', '\u0000', ''] : ['', '\u0000', '\ufeff', 'a,b\n"open'];
    for (const text of texts) {
      made.push({ label: `body ${type} ${JSON.stringify(text)}`, params: plain, query: {}, body: { type, text } });
    }
    if (type === 'application/json') {
      for (const value of [null, [], 'text', 1, {}, { unknown: 1 }, [[]]]) {
        made.push({
          label: `body ${JSON.stringify(value)}`,
          params: plain,
          query: {},
          body: { type, text: JSON.stringify(value) },
        });
      }
    }
    for (const name of properties) {
      for (const value of [random.pick(VALUES), random.pick(VALUES), random.pick(VALUES)]) {
        const label = `body ${type} {${name}: ${JSON.stringify(value)?.slice(0, 40)}}`;
        made.push({ label, params: plain, query: {}, body: body({ [name]: value }) });
      }
    }
    for (let i = 0; i < RANDOM_CASES; i++) {
      // Every field at once, each odd or missing.
      const fields = Object.fromEntries(
        properties.flatMap((name) => (random.next() < 0.3 ? [] : [[name, random.pick(VALUES)]])),
      );
      made.push({
        label: `body ${type} ${JSON.stringify(fields).slice(0, 80)}`,
        params: plain,
        query: {},
        body: body(fields),
      });
    }
  }
  return made;
}

function url(op: Operation, c: Case): string {
  const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const text = c.params[name] ?? 'abc';
    // Half the odd texts go as they are (a bare `%`, `..`), half encoded.
    return text.length % 2 === 0 ? encodeURIComponent(text) : text.replace(/[/?#\s]/g, encodeURIComponent);
  });
  const query = new URLSearchParams(c.query).toString();
  return query ? `${path}?${query}` : path;
}

describe.each(BACKENDS)('malformed input to every operation on $name', (backend) => {
  const t = useTestApp(
    backend,
    { RATE_LIMIT_ENABLED: 'false', NOTIFICATIONS_ALLOW_PRIVATE: 'true' },
    { accounts: true, admin: ADMIN },
  );

  it.skipIf(!backend.available)('never a 5xx; every error a JSON {detail}', async () => {
    const random = generator(SEED);
    const faults: string[] = [];
    let sent = 0;
    for (const op of operations()) {
      // Signing out would end the session the other cases use.
      if (op.path === '/api/v1/auth/logout') continue;
      for (const c of cases(op, random)) {
        const response = await t.app.inject({
          method: op.method,
          url: url(op, c),
          headers: { ...t.admin.headers, ...(c.body ? { 'content-type': c.body.type } : {}) },
          ...(c.body ? { payload: c.body.text } : {}),
        });
        sent++;
        const wrong = answerFault({
          status: response.statusCode,
          contentType: response.headers['content-type'] as string | undefined,
          body: response.body,
        });
        if (wrong) faults.push(`${op.method} ${op.path} ${c.label} → ${wrong}`);
      }
    }
    expect(sent).toBeGreaterThan(1000);
    expect(faults).toEqual([]);
  });

  it.skipIf(!backend.available)('what it found, each answered 422 with a detail that says why', async () => {
    const send = (method: string, url: string, body?: { type: string; text: string }) =>
      t.app.inject({
        method,
        url,
        headers: { ...t.admin.headers, ...(body ? { 'content-type': body.type } : {}) },
        ...(body ? { payload: body.text } : {}),
      });
    const json = (value: unknown) => ({ type: 'application/json', text: JSON.stringify(value) });
    // No body on a route that takes several media types: was a 500 (the handler read undefined).
    expectError(
      await send('POST', '/api/v1/auth/login'),
      422,
      /^body: required, as application\/json or application\/x-www-form-urlencoded$/,
    );
    expectError(await send('POST', '/api/v1/links/import'), 422, /^body: required, as application\/json or text\/csv$/);
    // Ids past 2^53: were a 500 on PostgreSQL (past its bigint).
    const huge = '9'.repeat(20);
    for (const url of [
      `/api/v1/admin/users/${huge}`,
      `/api/v1/admin/users?after=${huge}`,
      `/api/v1/admin/dlq/${huge}`,
      `/api/v1/admin/dlq?after=${huge}`,
    ]) {
      expectError(await send('GET', url), 422, /must be at most 9007199254740991/);
    }
    expectError(await send('DELETE', `/api/v1/auth/api-keys/${huge}`), 422, /must be at most/);
    // U+0000: was a 500 on PostgreSQL, whose text cannot hold it; refused on both backends alike.
    const nul = /must not contain the NUL character \(U\+0000\)/;
    expectError(await send('POST', '/api/v1/auth/api-keys', json({ name: 'a\u0000b' })), 422, /^body: 'name' must not/);
    expectError(await send('GET', '/urls?q=a%00b'), 422, /^query parameter 'q' must not/);
    expectError(
      await send(
        'POST',
        '/api/v1/notifications/channels',
        json({ type: 'chat', name: '\u0000', url: 'http://127.0.0.1:9/' }),
      ),
      422,
      nul,
    );
    expectError(await send('PATCH', '/api/v1/admin/settings', json({ '\u0000': 1 })), 422);
  });
});
