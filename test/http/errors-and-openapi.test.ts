import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { compileEverySchema } from '../../src/http/validation.js';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS } from '../helpers/backends.js';
import {
  codeMaker,
  createMapping,
  expectError,
  expectJsonContentType,
  newMapping,
  postShorten,
  HTTP_TEST_ENV,
} from '../helpers/http.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- walks the untyped OpenAPI and log JSON
type Json = Record<string, any>;

/** Spec §4.2, §7, §9; design §2 "Errors". */
describe.each(BACKENDS)('health, errors and OpenAPI on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('err');
  const app = useTestApp(backend, HTTP_TEST_ENV);

  // Each route's validators and serializers are compiled when first used (src/http/validation.ts):
  // here all the rest are, so that a schema that cannot compile fails the suite, as it failed
  // every start of the service before.
  test("every route's validators and response serializers compile", () => {
    const compiled = compileEverySchema(app.app);
    console.log(`${backend.name}: ${compiled} schemas compiled that no request of the suite had used`);
    expect(compiled).toBeGreaterThan(100);
    expect(compileEverySchema(app.app)).toBe(0);
  });

  describe('GET /health', () => {
    test('200 {"status":"ok"} as JSON', async () => {
      const response = await app.inject({ method: 'GET', url: '/health' });
      expect(response.statusCode).toBe(200);
      expectJsonContentType(response);
      expect(response.json()).toEqual({ status: 'ok' });
      expect(response.body).toBe('{"status":"ok"}');
    });

    test('HEAD /health → 200', async () => {
      expect((await app.inject({ method: 'HEAD', url: '/health' })).statusCode).toBe(200);
    });
  });

  describe('unknown paths → 404 {detail}', () => {
    test.each([
      ['GET', '/a/b/c'],
      ['GET', '/abcdef/extra'],
      ['DELETE', '/abcdef/extra'],
      ['GET', '/shorten/x'],
      ['POST', '/a/b/c'],
      ['GET', '/urls/1'],
      ['GET', '/health/x/y'],
    ])('%s %s', async (method, url) => {
      const response = await app.inject({ method: method as 'GET', url });
      if (method === 'HEAD') {
        expect(response.statusCode).toBe(404);
        expect(response.body).toBe('');
      } else {
        expectError(response, 404);
      }
    });
  });

  // `/` names no mapping: it opens the web client (design §3), which lives under /app/.
  describe('/ redirects to the web client', () => {
    test.each(['GET', 'HEAD'])('%s / → 302 to /app/', async (method) => {
      const response = await app.inject({ method: method as 'GET', url: '/' });
      expect(response.statusCode).toBe(302);
      expect(response.headers.location).toBe('/app/');
    });

    test.each(['POST', 'PUT', 'PATCH', 'DELETE'])('%s / → 405 with Allow: GET, HEAD, OPTIONS', async (method) => {
      const response = await app.inject({ method: method as 'GET', url: '/' });
      expect(response.headers.allow).toBe('GET, HEAD, OPTIONS');
      expectError(response, 405);
    });

    test('OPTIONS / → 204 with Allow', async () => {
      const response = await app.inject({ method: 'OPTIONS', url: '/' });
      expect(response.statusCode).toBe(204);
      expect(response.headers.allow).toBe('GET, HEAD, OPTIONS');
    });
  });

  describe('wrong method → 405 {detail} with Allow', () => {
    test.each([
      ['PUT', '/abcdef', 'GET, HEAD, PATCH, DELETE, OPTIONS'],
      ['POST', '/abcdef', 'GET, HEAD, PATCH, DELETE, OPTIONS'],
      ['PUT', '/abc-12', 'GET, HEAD, PATCH, DELETE, OPTIONS'],
      ['GET', '/shorten', 'POST, OPTIONS'],
      ['HEAD', '/shorten', 'POST, OPTIONS'],
      ['PUT', '/shorten', 'POST, OPTIONS'],
      ['PATCH', '/shorten', 'POST, OPTIONS'],
      ['DELETE', '/shorten', 'POST, OPTIONS'],
      ['DELETE', '/urls', 'GET, HEAD, OPTIONS'],
      ['POST', '/urls', 'GET, HEAD, OPTIONS'],
      ['PUT', '/urls', 'GET, HEAD, OPTIONS'],
      ['PATCH', '/urls', 'GET, HEAD, OPTIONS'],
      ['POST', '/health', 'GET, HEAD, OPTIONS'],
      ['DELETE', '/health', 'GET, HEAD, OPTIONS'],
    ])('%s %s → Allow: %s', async (method, url, allow) => {
      const response = await app.inject({ method: method as 'GET', url });
      expect(response.statusCode, response.body).toBe(405);
      expect(response.headers.allow).toBe(allow);
      if (method !== 'HEAD') expectError(response, 405);
    });

    test('a wrong method does not touch the mapping', async () => {
      const created = await createMapping(app, newMapping(code, { url: 'https://example.com/still' }));
      expect((await app.inject({ method: 'PUT', url: `/${created.code}` })).statusCode).toBe(405);
      expect((await app.inject({ method: 'POST', url: `/${created.code}` })).statusCode).toBe(405);
      const response = await app.inject({ method: 'GET', url: `/${created.code}` });
      expect(response.statusCode).toBe(302);
      expect(response.headers.location).toBe('https://example.com/still');
    });
  });

  describe('OPTIONS → 204 with Allow', () => {
    test.each([
      ['/abcdef', 'GET, HEAD, PATCH, DELETE, OPTIONS'],
      ['/shorten', 'POST, OPTIONS'],
      ['/urls', 'GET, HEAD, OPTIONS'],
      ['/health', 'GET, HEAD, OPTIONS'],
    ])('OPTIONS %s → Allow: %s', async (url, allow) => {
      const response = await app.inject({ method: 'OPTIONS', url });
      expect(response.statusCode).toBe(204);
      expect(response.headers.allow).toBe(allow);
      expect(response.body).toBe('');
    });
  });

  describe('500 hides the error', () => {
    const logLines: Json[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) logLines.push(JSON.parse(line) as Json);
        done();
      },
    });
    const broken = useTestApp(backend, HTTP_TEST_ENV, { logger: { level: 'error', stream } });

    beforeAll(async () => {
      if (!backend.available) return;
      await createMapping(broken.app, newMapping(code, { code: 'cached01', url: 'https://example.com/cached' }));
      // Warm the redirect cache, then pull the database out from under the live app.
      expect((await broken.app.inject({ method: 'GET', url: '/cached01' })).statusCode).toBe(302);
      await broken.service.database.close();
    });

    const internal = (response: Awaited<ReturnType<FastifyInstance['inject']>>) => {
      expectError(response, 500, 'Internal server error');
      expect(response.body).toBe('{"detail":"Internal server error"}');
    };

    test('GET /urls → 500 {"detail":"Internal server error"}', async () => {
      internal(await broken!.app.inject({ method: 'GET', url: '/urls' }));
    });

    test('POST /shorten → 500', async () => {
      internal(await postShorten(broken!.app, newMapping(code)));
    });

    test('GET, PATCH and DELETE of a code not cached → 500', async () => {
      internal(await broken!.app.inject({ method: 'GET', url: '/notcached' }));
      internal(
        await broken!.app.inject({
          method: 'PATCH',
          url: '/notcached',
          headers: { 'content-type': 'application/json' },
          payload: '{"url":"https://example.com/x"}',
        }),
      );
      internal(await broken!.app.inject({ method: 'DELETE', url: '/notcached' }));
    });

    test('validation still answers 422 and health 200 without the database', async () => {
      expectError(await broken!.app.inject({ method: 'GET', url: '/abc-12' }), 422);
      expect((await broken!.app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    });

    test('the error is logged, with its stack, but never shown', async () => {
      const before = logLines.length;
      const response = await broken!.app.inject({ method: 'GET', url: '/urls' });
      internal(response);
      const logged = logLines.slice(before).filter((line) => line.level >= 50 && line.err);
      expect(logged.length).toBeGreaterThan(0);
      const err = logged[0]!.err as Json;
      expect(typeof err.message).toBe('string');
      expect(String(err.stack)).toContain(String(err.message));
      expect(response.body).not.toContain(String(err.message));
      expect(response.body).not.toMatch(/\bat\s+\S+\s+\(/);
    });
  });

  describe('OpenAPI', () => {
    let spec: Json;
    beforeAll(async () => {
      if (!backend.available) return;
      const response = await app.inject({ method: 'GET', url: '/openapi.json' });
      expect(response.statusCode).toBe(200);
      expectJsonContentType(response);
      spec = response.json<Json>();
    });

    const deref = (schema: Json): Json => {
      const ref = schema.$ref as string | undefined;
      if (ref === undefined) return schema;
      const match = /^#\/components\/schemas\/(.+)$/.exec(ref);
      expect(match, ref).not.toBeNull();
      const target = spec.components.schemas[match![1]!] as Json | undefined;
      expect(target, ref).toBeDefined();
      return target!;
    };
    const refName = (schema: Json) => String(schema.$ref).replace('#/components/schemas/', '');
    const jsonSchema = (part: Json) => part.content['application/json'].schema as Json;
    const operations = () => {
      const found: Record<string, { path: string; method: string; op: Json }> = {};
      for (const [path, item] of Object.entries(spec.paths as Json)) {
        for (const [method, op] of Object.entries(item as Json)) {
          if (op && typeof op === 'object' && 'operationId' in op) found[op.operationId] = { path, method, op };
        }
      }
      return found;
    };
    /** The non-null variant of a nullable property, after checking that null is allowed. */
    const nullable = (property: Json): Json => {
      if (Array.isArray(property.type)) {
        expect(property.type).toContain('null');
        return { ...property, type: property.type.find((t: string) => t !== 'null') };
      }
      const variants = (property.anyOf ?? property.oneOf) as Json[] | undefined;
      if (variants === undefined) {
        expect(property.nullable).toBe(true);
        return property;
      }
      expect(variants.some((v) => v.type === 'null')).toBe(true);
      const rest = variants.filter((v) => v.type !== 'null');
      expect(rest).toHaveLength(1);
      return rest[0]!;
    };
    const codeRules = { type: 'string', minLength: 6, maxLength: 10, pattern: '^[a-zA-Z0-9]+$' };

    test('is OpenAPI 3.x titled UrlShortener, version 0.1.0', () => {
      expect(String(spec.openapi)).toMatch(/^3\.\d+\.\d+$/);
      expect(spec.info.title).toBe('UrlShortener');
      expect(spec.info.version).toBe('0.1.0');
    });

    test('declares the tags url_mapping and infrastructure', () => {
      const names = (spec.tags as Json[]).map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['url_mapping', 'infrastructure']));
    });

    test.each([
      ['shorten', 'post', '/shorten', 'url_mapping'],
      ['resolve', 'get', '/{code}', 'url_mapping'],
      ['delete', 'delete', '/{code}', 'url_mapping'],
      ['list_all', 'get', '/urls', 'url_mapping'],
      ['health_check', 'get', '/health', 'infrastructure'],
    ])('operation %s is %s %s, tagged %s', (operationId, method, path, tag) => {
      const found = operations()[operationId];
      expect(found).toBeDefined();
      expect(found!.method).toBe(method);
      expect(found!.path).toBe(path);
      expect(found!.op.tags).toEqual([tag]);
    });

    test('shorten: required UrlMappingCreate body, 201 UrlMappingRead, 422 ErrorResponse', () => {
      const { op } = operations().shorten!;
      expect(op.requestBody.required).toBe(true);
      expect(refName(jsonSchema(op.requestBody))).toBe('UrlMappingCreate');
      expect(refName(jsonSchema(op.responses['201']))).toBe('UrlMappingRead');
      expect(refName(jsonSchema(op.responses['422']))).toBe('ErrorResponse');
    });

    test('resolve: the code path parameter with its rules; 302 with a Location uri header and no body; 404 and 422', () => {
      const { op } = operations().resolve!;
      const param = (op.parameters as Json[]).find((p) => p.name === 'code');
      expect(param).toMatchObject({ in: 'path', required: true, schema: codeRules });
      const redirect = op.responses['302'] as Json;
      expect(redirect.headers.Location.schema).toMatchObject({ type: 'string', format: 'uri' });
      expect(redirect.content).toBeUndefined();
      expect(refName(jsonSchema(op.responses['404']))).toBe('ErrorResponse');
      expect(refName(jsonSchema(op.responses['422']))).toBe('ErrorResponse');
    });

    test('delete: the code path parameter; 204 with no content; 404 and 422', () => {
      const { op } = operations().delete!;
      const param = (op.parameters as Json[]).find((p) => p.name === 'code');
      expect(param).toMatchObject({ in: 'path', required: true, schema: codeRules });
      expect(op.responses['204']).toBeDefined();
      expect(op.responses['204'].content).toBeUndefined();
      expect(refName(jsonSchema(op.responses['404']))).toBe('ErrorResponse');
      expect(refName(jsonSchema(op.responses['422']))).toBe('ErrorResponse');
    });

    test('list_all: 200 with an array of UrlMappingRead', () => {
      const { op } = operations().list_all!;
      const schema = jsonSchema(op.responses['200']);
      expect(schema.type).toBe('array');
      expect(refName(schema.items)).toBe('UrlMappingRead');
    });

    test('health_check: 200 with a required status equal to ok', () => {
      const { op } = operations().health_check!;
      const schema = deref(jsonSchema(op.responses['200']));
      expect(schema.required).toEqual(['status']);
      const status = schema.properties.status as Json;
      expect(status.type).toBe('string');
      expect(status.const === 'ok' || JSON.stringify(status.enum) === '["ok"]').toBe(true);
    });

    test('components: UrlMappingCreate, all four fields required, with the spec constraints', () => {
      const schema = spec.components.schemas.UrlMappingCreate as Json;
      expect(schema.type).toBe('object');
      expect([...schema.required].sort()).toEqual(['click_count', 'code', 'created_at', 'url']);
      // Besides the spec's four, the optional lifecycle limits (issue 15), never required.
      expect(Object.keys(schema.properties).sort()).toEqual([
        'click_count',
        'code',
        'created_at',
        'expires_at',
        'max_visits',
        'url',
      ]);
      expect(nullable(schema.properties.expires_at)).toMatchObject({ type: 'string', format: 'date-time' });
      expect(nullable(schema.properties.max_visits)).toMatchObject({ type: 'integer', minimum: 1 });
      expect(schema.properties.code).toMatchObject(codeRules);
      expect(schema.properties.url).toMatchObject({ type: 'string', minLength: 1 });
      expect(schema.properties.created_at).toMatchObject({ type: 'string', format: 'date-time' });
      expect(schema.properties.click_count).toMatchObject({ type: 'integer', minimum: 0 });
    });

    test('components: UrlMappingRead, all five fields required, with the spec constraints', () => {
      const schema = spec.components.schemas.UrlMappingRead as Json;
      expect(schema.type).toBe('object');
      expect([...schema.required].sort()).toEqual(['click_count', 'code', 'created_at', 'id', 'url']);
      // Besides the spec's five, the optional owner (issue 14), shown to owners and administrators only.
      expect(Object.keys(schema.properties).sort()).toEqual([
        'click_count',
        'code',
        'created_at',
        'expires_at',
        'id',
        'max_visits',
        'owner',
        'url',
      ]);
      expect(schema.properties.owner.type).toBe('integer');
      // And the lifecycle limits (issue 15), present only on a link that has them.
      expect(schema.properties.expires_at).toMatchObject({ type: 'string', format: 'date-time' });
      expect(schema.properties.max_visits).toMatchObject({ type: 'integer', minimum: 1 });
      expect(schema.properties.id.type).toBe('integer');
      expect(schema.properties.id.minimum).toBeUndefined();
      expect(schema.properties.id.maximum).toBeUndefined();
      expect(schema.properties.code).toMatchObject(codeRules);
      expect(schema.properties.url).toMatchObject({ type: 'string', minLength: 1 });
      expect(schema.properties.created_at).toMatchObject({ type: 'string', format: 'date-time' });
      expect(schema.properties.click_count).toMatchObject({ type: 'integer', minimum: 0 });
    });

    test('components: UrlMappingUpdate, nothing required, each field nullable with the spec constraints', () => {
      const schema = spec.components.schemas.UrlMappingUpdate as Json;
      expect(schema.type).toBe('object');
      expect(schema.required ?? []).toEqual([]);
      expect(Object.keys(schema.properties).sort()).toEqual([
        'click_count',
        'code',
        'created_at',
        'expires_at',
        'max_visits',
        'url',
      ]);
      expect(nullable(schema.properties.expires_at)).toMatchObject({ type: 'string', format: 'date-time' });
      expect(nullable(schema.properties.max_visits)).toMatchObject({ type: 'integer', minimum: 1 });
      expect(nullable(schema.properties.code)).toMatchObject(codeRules);
      expect(nullable(schema.properties.url)).toMatchObject({ type: 'string', minLength: 1 });
      expect(nullable(schema.properties.created_at)).toMatchObject({ type: 'string', format: 'date-time' });
      expect(nullable(schema.properties.click_count)).toMatchObject({ type: 'integer', minimum: 0 });
    });

    test('components: ErrorResponse, a required string detail', () => {
      const schema = spec.components.schemas.ErrorResponse as Json;
      expect(schema.type).toBe('object');
      expect(schema.required).toEqual(['detail']);
      expect(schema.properties.detail.type).toBe('string');
    });

    test('the paths carry no version prefix', () => {
      for (const path of ['/shorten', '/{code}', '/urls', '/health']) expect(spec.paths[path]).toBeDefined();
    });
  });

  describe('GET /docs/', () => {
    test('serves an HTML page', async () => {
      const response = await app.inject({ method: 'GET', url: '/docs/' });
      expect(response.statusCode).toBe(200);
      expect(String(response.headers['content-type'])).toMatch(/^text\/html/);
      expect(response.body).toMatch(/<html/i);
    });
  });
});
