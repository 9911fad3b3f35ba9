import { type Static, type TSchema, Type } from 'typebox';
import { CODE_MAX_LENGTH, CODE_MIN_LENGTH } from '../domain/url-mapping.js';

/**
 * Route schemas (TypeBox). Shared ones carry an `$id`: they are registered once, validate by
 * reference and appear under that name in the OpenAPI document's components.
 */

const codeRules = { minLength: CODE_MIN_LENGTH, maxLength: CODE_MAX_LENGTH, pattern: '^[a-zA-Z0-9]+$' } as const;

export const UrlMappingCreate = Type.Object(
  {
    code: Type.String({ ...codeRules, description: 'The short code: 6 to 10 letters and digits, case-sensitive.' }),
    url: Type.String({ minLength: 1, description: 'The absolute http(s) URL to redirect to.' }),
    created_at: Type.String({ format: 'date-time' }),
    click_count: Type.Integer({ minimum: 0 }),
  },
  { $id: 'UrlMappingCreate', additionalProperties: false },
);

export const UrlMappingRead = Type.Object(
  {
    id: Type.Integer(),
    code: Type.String(codeRules),
    url: Type.String({ minLength: 1 }),
    created_at: Type.String({ format: 'date-time' }),
    click_count: Type.Integer({ minimum: 0 }),
  },
  { $id: 'UrlMappingRead', additionalProperties: false },
);

export const UrlMappingUpdate = Type.Object(
  {
    code: Type.Optional(Type.Union([Type.String(codeRules), Type.Null()])),
    url: Type.Optional(Type.Union([Type.String({ minLength: 1 }), Type.Null()])),
    created_at: Type.Optional(Type.Union([Type.String({ format: 'date-time' }), Type.Null()])),
    click_count: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])),
  },
  { $id: 'UrlMappingUpdate', additionalProperties: false },
);

export const ErrorResponse = Type.Object(
  { detail: Type.String({ description: 'Human-readable error description.' }) },
  { $id: 'ErrorResponse' },
);

export const HealthResponse = Type.Object({ status: Type.Literal('ok') }, { $id: 'HealthResponse' });

export const SHARED_SCHEMAS: readonly TSchema[] = [
  UrlMappingCreate,
  UrlMappingRead,
  UrlMappingUpdate,
  ErrorResponse,
  HealthResponse,
];

/** A reference to a shared schema that keeps the static type of the schema it points at. */
export function ref<T extends TSchema>(schema: T) {
  const id = (schema as { $id?: string }).$id;
  if (id === undefined) throw new Error('ref() needs a schema with an $id');
  return Type.Unsafe<Static<T>>({ $ref: `${id}#` } as unknown as TSchema);
}

export const CodeParams = Type.Object({ code: Type.String(codeRules) });

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Page size, 1 to 1000.' })),
    after: Type.Optional(
      Type.Integer({
        minimum: 0,
        // Ids are exact JSON integers; a larger value would overflow PostgreSQL's bigint (a 500).
        maximum: Number.MAX_SAFE_INTEGER,
        description: 'Return mappings with an id greater than this.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const errorResponse = (description: string) => ({ ...ref(ErrorResponse), description });

/** A string that is one of `values`, as a JSON Schema `enum`, keeping the literal type. */
export function oneOf<const T extends readonly string[]>(values: T, options: { description?: string } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options } as unknown as TSchema);
}
