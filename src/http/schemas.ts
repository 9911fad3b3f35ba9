import { type Static, type TSchema, Type } from 'typebox';
import { CODE_MAX_LENGTH, CODE_MIN_LENGTH, MAX_VISITS_MAX } from '../domain/url-mapping.js';
import { VISIT_SCHEMAS } from './visit-schemas.js';

/**
 * Route schemas (TypeBox). Shared ones carry an `$id`: they are registered once, validate by
 * reference and appear under that name in the OpenAPI document's components.
 */

const codeRules = { minLength: CODE_MIN_LENGTH, maxLength: CODE_MAX_LENGTH, pattern: '^[a-zA-Z0-9]+$' } as const;

/** The optional lifecycle limits (README "Expiry and visit limits"), in a body that sets them. */
const limitFields = (when: string) => ({
  expires_at: Type.Optional(
    Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: `When the link stops answering (RFC 3339; ${when}); after it, \`GET /{code}\` answers 410. Null: never.`,
    }),
  ),
  max_visits: Type.Optional(
    Type.Union([Type.Integer({ minimum: 1, maximum: MAX_VISITS_MAX }), Type.Null()], {
      description:
        'How many redirects (GET answered 302, bots included) the link answers at most; then `GET /{code}` answers 410. Null: no limit.',
    }),
  ),
});

/** The limits as the read view shows them: only when set. */
const limitReadFields = {
  expires_at: Type.Optional(
    Type.String({ format: 'date-time', description: 'When the link stops answering; absent when it has no expiry.' }),
  ),
  max_visits: Type.Optional(
    Type.Integer({
      minimum: 1,
      description: 'How many redirects the link answers at most; absent when it has no limit.',
    }),
  ),
};

export const UrlMappingCreate = Type.Object(
  {
    code: Type.String({ ...codeRules, description: 'The short code: 6 to 10 letters and digits, case-sensitive.' }),
    url: Type.String({ minLength: 1, description: 'The absolute http(s) URL to redirect to.' }),
    created_at: Type.String({ format: 'date-time' }),
    click_count: Type.Integer({ minimum: 0 }),
    ...limitFields('in the future'),
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
    owner: Type.Optional(
      Type.Integer({
        description:
          'The id of the user who created the mapping: shown to that user and to administrators only, and absent for a mapping created anonymously.',
      }),
    ),
    ...limitReadFields,
  },
  { $id: 'UrlMappingRead', additionalProperties: false },
);

export const LinkCreate = Type.Object(
  {
    url: Type.String({ minLength: 1, description: 'The absolute http(s) URL to redirect to.' }),
    code: Type.Optional(
      Type.String({ ...codeRules, description: 'The short code; generated (CODE_LENGTH characters) when omitted.' }),
    ),
    ...limitFields('in the future'),
  },
  { $id: 'LinkCreate', additionalProperties: false },
);

export const UrlMappingUpdate = Type.Object(
  {
    code: Type.Optional(Type.Union([Type.String(codeRules), Type.Null()])),
    url: Type.Optional(Type.Union([Type.String({ minLength: 1 }), Type.Null()])),
    created_at: Type.Optional(Type.Union([Type.String({ format: 'date-time' }), Type.Null()])),
    click_count: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])),
    ...limitFields('a time already past stops the link at once; null clears the expiry'),
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
  LinkCreate,
  ErrorResponse,
  HealthResponse,
  ...VISIT_SCHEMAS,
];

/** A reference to a shared schema that keeps the static type of the schema it points at. */
export function ref<T extends TSchema>(schema: T) {
  const id = (schema as { $id?: string }).$id;
  if (id === undefined) throw new Error('ref() needs a schema with an $id');
  return Type.Unsafe<Static<T>>({ $ref: `${id}#` } as unknown as TSchema);
}

export const LIST_SORTS = ['id', '-id', 'created_at', '-created_at', 'click_count', '-click_count'] as const;
export type ListSortParam = (typeof LIST_SORTS)[number];

export const CodeParams = Type.Object({ code: Type.String(codeRules) });

/**
 * A row's id, as a path parameter or a page's cursor: an exact JSON integer, at most 2^53 - 1; a
 * larger value would overflow PostgreSQL's bigint in the query (a 500), not find nothing.
 */
export function rowId(minimum: 0 | 1, options: { description?: string } = {}) {
  return Type.Integer({ minimum, maximum: Number.MAX_SAFE_INTEGER, ...options });
}

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Page size, 1 to 1000.' })),
    after: Type.Optional(
      rowId(0, {
        description:
          'Return the mappings after the one with this id, in the order of `sort` (with the default order: an id greater than this).',
      }),
    ),
    owner: Type.Optional(
      Type.Unsafe<'me'>({
        type: 'string',
        enum: ['me'],
        description: "`me`: only the signed-in caller's own mappings.",
      }),
    ),
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'Only mappings whose code or target URL contains this, ignoring case.',
      }),
    ),
    sort: Type.Optional(
      Type.Unsafe<ListSortParam>({
        type: 'string',
        enum: [...LIST_SORTS],
        description: 'The order: a field, `-` first for descending; ties in id order the same way. Default `id`.',
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
