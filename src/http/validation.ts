import { Ajv, type ErrorObject } from 'ajv';
import type { FastifySchema, FastifySchemaCompiler } from 'fastify';
import type { TSchema } from 'typebox';
import { isValidTimestamp } from '../domain/timestamp.js';
import { EMAIL_PATTERN, USERNAME_PATTERN } from '../domain/user.js';

/**
 * Two validators: bodies are taken exactly as sent (no type coercion, unknown fields refused);
 * path and query parameters, which arrive as text, are coerced to their declared types.
 */
export function createValidatorCompiler(shared: readonly TSchema[]): FastifySchemaCompiler<FastifySchema> {
  const make = (coerceTypes: boolean) => {
    const ajv = new Ajv({ allErrors: false, coerceTypes, removeAdditional: false, useDefaults: true, strict: false });
    ajv.addFormat('date-time', { type: 'string', validate: isValidTimestamp });
    ajv.addFormat('uri', { type: 'string', validate: (s: string) => URL.canParse(s) });
    for (const schema of shared) ajv.addSchema(schema);
    return ajv;
  };
  const body = make(false);
  const text = make(true);
  return ({ schema, httpPart }) => (httpPart === 'body' ? body : text).compile(schema as object);
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
