/**
 * The app's schema compilers put off both the compile of each schema and its check against JSON
 * Schema's meta-schema (src/http/validation.ts); `compileEverySchema`, which the API suite runs
 * on the whole app, does both, so that a schema that is not valid JSON Schema still fails a test.
 */
import Fastify from 'fastify';
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import { compileEverySchema, createSchemaCompilers } from '../../src/http/validation.js';

async function appWith(body: object, shared: object[] = []) {
  const compilers = createSchemaCompilers(shared as never);
  const app = Fastify({ schemaController: compilers.schemaController });
  app.setValidatorCompiler(compilers.validatorCompiler);
  compilers.owns(app);
  app.post('/x', { schema: { body } }, async () => ({ ok: true }));
  await app.ready();
  return app;
}

describe('compileEverySchema', () => {
  it('compiles what no request used, once', async () => {
    const app = await appWith(Type.Object({ name: Type.String({ minLength: 1 }) }));
    expect(compileEverySchema(app)).toBe(1);
    expect(compileEverySchema(app)).toBe(0);
    await app.close();
  });

  it("refuses a route's schema that breaks the meta-schema, naming the rule, though nothing compiled it at start", async () => {
    const app = await appWith({ type: 'object', properties: { name: { type: 'string', minLength: 'one' } } });
    const answer = await app.inject({ method: 'GET', url: '/nothing' }); // the app runs meanwhile
    expect(answer.statusCode).toBe(404);
    expect(() => compileEverySchema(app)).toThrow(/is invalid: .*minLength must be integer/);
    await app.close();
  });

  it('refuses a shared schema that breaks it, by its $id, also after its route was compiled by a request', async () => {
    const shared = { $id: 'Broken', type: 'object', required: 'name' };
    const app = await appWith({ type: 'object' }, [shared]);
    expect((await app.inject({ method: 'POST', url: '/x', payload: {} })).statusCode).toBe(200);
    expect(() => compileEverySchema(app)).toThrow(/^schema Broken is invalid: .*required must be array/);
    await app.close();
  });
});
