import { type TSchema, Type } from 'typebox';
import { DEVICE_CLASSES, STATS_INTERVALS } from '../domain/visit.js';

/** The schemas of `GET /api/v1/links/{code}/stats` and `/visits` (issue 15), shared by `$id`. */

const nullableString = (description: string) => Type.Union([Type.String(), Type.Null()], { description });
const deviceClass = Type.Unsafe<(typeof DEVICE_CLASSES)[number]>({
  type: 'string',
  enum: [...DEVICE_CLASSES],
  description: 'The device class derived from the User-Agent.',
});

export const Visit = Type.Object(
  {
    visited_at: Type.String({ format: 'date-time' }),
    referrer_host: nullableString("The referrer's host only; null: none sent (direct) or not an http(s) URL."),
    browser: nullableString('The browser named by the User-Agent; null: unknown.'),
    os: nullableString('The operating system named by the User-Agent; null: unknown.'),
    device: deviceClass,
    bot: Type.Boolean({ description: 'The User-Agent is a known bot, crawler or tool (isbot).' }),
    country: Type.Union([Type.String({ pattern: '^[A-Z]{2}$' }), Type.Null()], {
      description: 'ISO 3166-1 alpha-2, from VISIT_COUNTRY_HEADER; null: unknown or not configured.',
    }),
  },
  { $id: 'Visit', additionalProperties: false },
);

export const VisitPage = Type.Object(
  {
    items: Type.Array(Type.Unsafe({ $ref: 'Visit#' }), { description: 'Newest first.' }),
    next_cursor: Type.Union([Type.String(), Type.Null()], {
      description: 'Give as `cursor` for the next page; null on the last one.',
    }),
  },
  { $id: 'VisitPage' },
);

const TopEntries = Type.Array(
  Type.Object({
    value: Type.Union([Type.String(), Type.Null()], {
      description:
        'null: unknown / direct. `(other)`: the visits of the values past the first 100 a dimension had on a day.',
    }),
    visits: Type.Integer(),
  }),
);

export const LinkStats = Type.Object(
  {
    code: Type.String(),
    from: Type.String({ format: 'date-time' }),
    to: Type.String({ format: 'date-time' }),
    interval: Type.Unsafe<(typeof STATS_INTERVALS)[number]>({ type: 'string', enum: [...STATS_INTERVALS] }),
    totals: Type.Object({
      visits: Type.Integer(),
      bots: Type.Integer(),
      humans: Type.Integer(),
      unique_visitors: Type.Integer({
        description:
          'Distinct visitors per UTC day (a daily salted hash of address and User-Agent, counted by a HyperLogLog sketch: an estimate, a visitor or two off for small counts, ±4.6% for large ones), summed over the days of the range.',
      }),
    }),
    series: Type.Array(
      Type.Object({ start: Type.String({ format: 'date-time' }), visits: Type.Integer(), bots: Type.Integer() }),
      { description: 'One entry per interval from the one holding `from` up to `to`, zeros included.' },
    ),
    top: Type.Object(
      {
        referrers: TopEntries,
        countries: TopEntries,
        browsers: TopEntries,
        os: TopEntries,
        devices: TopEntries,
      },
      { description: 'Most visits first, over the whole UTC days the range touches.' },
    ),
  },
  { $id: 'LinkStats' },
);

export const VISIT_SCHEMAS: readonly TSchema[] = [Visit, VisitPage, LinkStats];

const range = {
  from: Type.Optional(
    Type.String({ format: 'date-time', description: 'Start (inclusive); default: 30 days before `to`.' }),
  ),
  to: Type.Optional(Type.String({ format: 'date-time', description: 'End (exclusive); default: now.' })),
};

export const StatsQuery = Type.Object(
  {
    ...range,
    interval: Type.Optional(
      Type.Unsafe<(typeof STATS_INTERVALS)[number]>({
        type: 'string',
        enum: [...STATS_INTERVALS],
        description: 'The series step (weeks start on Monday, UTC); default `day`.',
      }),
    ),
    top: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 50, description: 'Entries per top list, 1 to 50; default 10.' }),
    ),
  },
  { additionalProperties: false },
);

export const VisitsQuery = Type.Object(
  {
    ...range,
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1000,
        description: 'Page size, 1 to 1000; default 100 (JSON). CSV without a limit streams every visit in the range.',
      }),
    ),
    cursor: Type.Optional(Type.String({ maxLength: 100, description: 'The `next_cursor` of the previous page.' })),
  },
  { additionalProperties: false },
);
