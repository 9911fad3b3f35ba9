import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  FastifySchema,
  FastifySchemaCompiler,
  FastifyServerOptions,
  HookHandlerDoneFunction,
} from 'fastify';
import type { TSchema } from 'typebox';
import { errors } from '../domain/errors.js';
import { isValidTimestamp } from '../domain/timestamp.js';
import { EMAIL_PATTERN, USERNAME_PATTERN } from '../domain/user.js';
import { addRouteHook } from './plugins/route-hooks.js';

/**
 * An app's schema compilers. Fastify compiles every route's validators and response serializers
 * as the routes are registered: about a quarter of a second of CPU at every start (`urlshortener
 * serve`, each CLI command that builds the service, each test's app), though a process uses few
 * of them, and the first request of a route can wait the few milliseconds its own take. These
 * compile each on first use instead, once. What has not been compiled yet is kept, so that
 * `compileEverySchema` can compile it all: a test does, so that a schema that cannot compile
 * fails there as it failed at start before, not at its route's first request in production.
 *
 * Nor is a schema checked against JSON Schema's meta-schema as it is added or compiled (Ajv's
 * `validateSchema`): the schemas are the service's own, the same at every start, and the check
 * compiled the meta-schema itself in each of the two Ajv instances first, 50–80 ms of every
 * start's 0.7 s of CPU. `compileEverySchema` checks every schema the app was given instead.
 */
export interface SchemaCompilers {
  /**
   * Two validators: bodies are taken exactly as sent (no type coercion, unknown fields refused);
   * path and query parameters, which arrive as text, are coerced to their declared types.
   */
  readonly validatorCompiler: FastifySchemaCompiler<FastifySchema>;
  /** Fastify's `schemaController` option: its serializers (fast-json-stringify, as by default). */
  readonly schemaController: NonNullable<FastifyServerOptions['schemaController']>;
}

/** What each app's compilers were given and have put off, by app (see `compileEverySchema`). */
const given = new WeakMap<object, { readonly pending: Set<() => unknown>; readonly schemas: Set<object> }>();

export function createSchemaCompilers(shared: readonly TSchema[]): SchemaCompilers & { owns(app: object): void } {
  const pending = new Set<() => unknown>();
  const schemas = new Set<object>(shared);
  /** `compile`, once, when the function it makes is first called. */
  const whenFirstUsed = <F extends (...args: never[]) => unknown>(compile: () => F) => {
    let compiled: F | undefined;
    const now = (): F => {
      if (compiled === undefined) {
        pending.delete(now);
        compiled = compile();
      }
      return compiled;
    };
    pending.add(now);
    return now;
  };
  const make = (coerceTypes: boolean) => {
    const ajv = new Ajv({
      allErrors: false,
      coerceTypes,
      removeAdditional: false,
      useDefaults: true,
      strict: false,
      validateSchema: false,
    });
    ajv.addFormat('date-time', { type: 'string', validate: isValidTimestamp });
    ajv.addFormat('uri', { type: 'string', validate: (s: string) => URL.canParse(s) });
    for (const schema of shared) ajv.addSchema(schema);
    return ajv;
  };
  const body = make(false);
  const text = make(true);
  return {
    validatorCompiler: ({ schema, httpPart }) => {
      const ajv = httpPart === 'body' ? body : text;
      schemas.add(schema as object);
      return withNulCheck(whenFirstUsed<ValidateFunction>(() => ajv.compile(schema as object)));
    },
    schemaController: {
      compilersFactory: {
        buildSerializer: (externalSchemas: unknown, options: unknown) => {
          const compile = SerializerSelector()(externalSchemas, options as never);
          return (route: Parameters<typeof compile>[0]) => {
            const serializer = whenFirstUsed(() => compile(route));
            return (doc: unknown) => serializer()(doc);
          };
        },
      },
    },
    owns: (app) => given.set(app, { pending, schemas }),
  };
}

/**
 * Checks every schema `app` (built with `createSchemaCompilers`, and ready) was given against JSON
 * Schema's meta-schema, and compiles those not compiled yet, throwing what a check or a compile
 * throws; returns how many compiles there were.
 */
export function compileEverySchema(app: object): number {
  const { pending, schemas } = given.get(app) ?? { pending: new Set(), schemas: new Set() };
  const checker = new Ajv({ strict: false });
  for (const schema of schemas) {
    if (!checker.validateSchema(schema)) {
      const id = (schema as { $id?: unknown }).$id;
      throw new Error(
        `schema ${id === undefined ? JSON.stringify(schema).slice(0, 200) : String(id)} is invalid: ${checker.errorsText()}`,
      );
    }
  }
  const compiles = [...pending];
  for (const compile of compiles) compile();
  return compiles.length;
}

const NUL_RULE = 'must not contain the NUL character (U+0000)';

/** `validator()`'s checks, and then `nulAt`'s: a value with U+0000 anywhere is refused as invalid. */
function withNulCheck(validator: () => ValidateFunction): ValidateFunction {
  // Fastify reads `errors` off the function it called, as Ajv's own validators carry them.
  const check = ((data: unknown) => {
    const validate = validator();
    const valid = validate(data);
    check.errors = validate.errors;
    const nul = valid ? nulAt(data) : undefined;
    if (nul === undefined) return valid;
    check.errors = [{ keyword: 'nul', instancePath: nul, schemaPath: '', params: {}, message: NUL_RULE }];
    return false;
  }) as ValidateFunction;
  check.errors = null;
  return check;
}

/**
 * Where `data` holds U+0000 (a JSON pointer to the string, or to the object whose key holds it),
 * or undefined. No field has a use for it, and PostgreSQL's text cannot hold it: a name or a
 * search with one failed in the database, a 500, where SQLite stored it.
 */
function nulAt(data: unknown, path = ''): string | undefined {
  if (typeof data === 'string') return data.includes('\u0000') ? path : undefined;
  if (data === null || typeof data !== 'object') return undefined;
  for (const [key, value] of Object.entries(data)) {
    if (key.includes('\u0000')) return path;
    const found = nulAt(value, `${path}/${key}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Refuses a request without a body (422, as a missing JSON body is on every other route) on the
 * routes whose body schema is given per media type (`body: {content}`: the login's JSON or form,
 * the import's CSV or JSON). Fastify checks such a body by the schema of the type it came as, so
 * a request with no body and no `Content-Type` reached the handler unchecked, which failed on it
 * with a 500. Call before the routes are registered.
 */
export function requireBodiesByMediaType(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const content = (route.schema?.body as { content?: Record<string, unknown> } | undefined)?.content;
    if (!content) return;
    const missing = `body: required, as ${Object.keys(content).join(' or ')}`;
    addRouteHook(
      route,
      'preValidation',
      (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) =>
        done(request.body === undefined ? errors.validation(missing) : undefined),
    );
  });
}

const PART_NAMES: Record<string, string> = {
  body: 'body',
  params: 'path parameter',
  querystring: 'query parameter',
  headers: 'header',
};

/** One human-readable sentence naming the field and the rule it broke. */
export function describeValidationError(errors: readonly ErrorObject[], part: string): string {
  const error = errors[0];
  const where = PART_NAMES[part] ?? part;
  if (!error) return `${where}: invalid`;
  const path = error.instancePath.split('/').filter(Boolean).join('.');
  const field = path ? `'${path}'` : part === 'body' ? 'the body' : 'the value';
  const p = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return part === 'params' || part === 'querystring'
        ? `${where} '${String(p.missingProperty)}' is required`
        : `${where}: '${path ? `${path}.` : ''}${String(p.missingProperty)}' is required`;
    case 'additionalProperties':
      return `${where}: unknown field '${String(p.additionalProperty)}'`;
    case 'type': {
      const type = String(p.type).replace(',', ' or ');
      if (!path && part === 'body') return `body: must be a JSON object`;
      return `${where === 'body' ? 'body: ' : `${where} `}${field} must be ${type === 'integer' ? 'an integer' : `a ${type}`}`;
    }
    case 'minLength':
      return `${prefix(where)}${field} must be at least ${String(p.limit)} characters`;
    case 'maxLength':
      return `${prefix(where)}${field} must be at most ${String(p.limit)} characters`;
    case 'pattern':
      return `${prefix(where)}${field} ${PATTERN_RULES[String(p.pattern)] ?? `must match ${String(p.pattern)}`}`;
    case 'minimum':
      return `${prefix(where)}${field} must be at least ${String(p.limit)}`;
    case 'maximum':
      return `${prefix(where)}${field} must be at most ${String(p.limit)}`;
    case 'format':
      return `${prefix(where)}${field} must be a valid ${String(p.format)}${p.format === 'date-time' ? ' (RFC 3339, e.g. 2024-01-31T12:00:00Z)' : ''}`;
    case 'anyOf':
      return `${prefix(where)}${field} has an invalid value`;
    default:
      return `${prefix(where)}${field} ${error.message ?? 'is invalid'}`;
  }
}

/** What each pattern in the schemas means, in words. */
const PATTERN_RULES: Readonly<Record<string, string>> = {
  '^[a-zA-Z0-9]+$': 'must match ^[a-zA-Z0-9]+$ (letters and digits only)',
  [USERNAME_PATTERN]: `must match ${USERNAME_PATTERN} (letters, digits, '_', '.' and '-')`,
  [EMAIL_PATTERN]: 'must be a valid email address',
};

function prefix(where: string): string {
  return where === 'body' ? 'body: ' : `${where} `;
}
