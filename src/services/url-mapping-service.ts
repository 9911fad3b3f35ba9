import { AppError, errors } from '../domain/errors.js';
import type { LinkWritePolicy } from '../domain/settings.js';
import {
  assertCodeNotReserved,
  assertValidClickCount,
  assertValidTargetUrl,
  type LinkLimitsBody,
  locationFor,
  normaliseCreatedAt,
  type NewUrlMapping,
  parseLinkLimits,
  type UrlMapping,
  type UrlMappingChanges,
  type UrlMappingView,
  type UrlRules,
} from '../domain/url-mapping.js';
import type { UrlEventFactory } from '../domain/url-events.js';
import type { Clock } from '../ports/clock.js';
import type { ListOptions, OwnerGuard, RedirectTarget, UrlMappingRepository } from '../ports/url-mapping-repository.js';
import type { ClickBuffer, PendingClicks } from '../support/click-buffer.js';
import { fetchPage } from '../support/paging.js';
import type { CachedLimits, CachedTarget, RedirectCache } from '../support/redirect-cache.js';
import { rawHeader } from '../support/raw-headers.js';
import { randomCode } from '../support/short-codes.js';
import type { Caller } from './execution-service.js';

export interface UrlMappingServiceOptions {
  readonly rules: UrlRules;
  /** Lower-case first path segments of the service's own routes; codes equal to one are refused. */
  readonly reservedCodes: () => ReadonlySet<string>;
  /** When set, each change records its `url.*` event in the change's transaction. */
  readonly events?: UrlEventFactory;
  /** LINK_WRITE_POLICY as in force now (a runtime setting); `open` when absent. */
  readonly writePolicy?: () => LinkWritePolicy;
  /** CODE_LENGTH: the length of generated codes (7 when absent). */
  readonly codeLength?: number;
  /** Where generated codes come from (tests give their own); random letters and digits by default. */
  readonly generateCode?: (length: number) => string;
  /** For `created_at` of `create`; the system clock when absent. */
  readonly clock?: Clock;
  /** Where counted redirects leave their visit (VISIT_RECORDING); none recorded when absent. */
  readonly visits?: VisitRecorder | undefined;
  /** COUNT_BOTS=false: whether a `User-Agent` is a bot's, whose redirects `click_count` leaves out. */
  readonly isBot?: ((userAgent: string | undefined) => boolean) | undefined;
}

/** The redirect path's side of visit recording (`VisitBuffer`): raw values in, nothing parsed. */
export interface VisitRecorder {
  /** `rawHeaders`: Node's `[name, value, …]` list, kept as it is (reading `headers` would build an object). */
  record(urlId: number, rawHeaders: readonly string[], address: string | undefined): void;
}

/** `POST /api/v1/links`: the URL, and the code when the caller picks one; the limits when wanted. */
export interface NewLink extends LinkLimitsBody {
  readonly url: string;
  readonly code?: string | undefined;
}

/** `POST /shorten`'s body: UrlMappingCreate and the optional limits. */
export type NewUrlMappingBody = Omit<NewUrlMapping, 'expiresAt' | 'maxVisits'> & LinkLimitsBody;

/** `PATCH /{code}`'s body: UrlMappingUpdate and the optional limits (null clears them). */
export type UrlMappingChangesBody = Omit<UrlMappingChanges, 'expiresAt' | 'maxVisits'> & LinkLimitsBody;

/** `GET /urls`: a page, and what to find and in which order. */
export interface ListQuery extends Pick<ListOptions, 'after' | 'limit' | 'q' | 'sort'> {
  /** `owner=me`: only the caller's own mappings (a signed-in caller only). */
  readonly mine?: boolean;
}

/** Generated codes tried before giving up (each collides with probability count / 62^length). */
const CODE_ATTEMPTS = 10;
const DEFAULT_CODE_LENGTH = 7;

/** Whether `caller` may see and change everything of a mapping owned by `owner`. */
const isOwnerOrAdmin = (caller: Caller | undefined, owner: number | null | undefined) =>
  caller !== undefined && (caller.role === 'admin' || caller.userId === owner);

/**
 * The mapping as `caller` may see it: `owner` only for its owner and administrators, and only
 * when there is one (an anonymous mapping reads exactly as spec §2.1 shows it).
 */
function visibleTo(caller: Caller | undefined, row: UrlMapping): UrlMappingView {
  const { owner, expires_at, max_visits, ...rest } = row;
  const view: { -readonly [K in keyof UrlMappingView]: UrlMappingView[K] } = rest;
  if (owner != null && isOwnerOrAdmin(caller, owner)) view.owner = owner;
  // Only when set: a link without limits reads exactly as spec §2.1 shows it.
  if (expires_at != null) view.expires_at = expires_at;
  if (max_visits != null) view.max_visits = max_visits;
  return view;
}

/** The stored mapping with the clicks on it that are not written yet. */
function withPendingClicks(row: UrlMapping, pending: PendingClicks): UrlMapping {
  const unwritten = pending(row.id);
  return unwritten === 0 ? row : { ...row, click_count: row.click_count + unwritten };
}

/** The redirect path's entry: the limits only for a link that has some (most have none). */
function cachedTarget(target: RedirectTarget | undefined): CachedTarget | undefined {
  if (target === undefined) return undefined;
  const { id, url, expires_at: expires, max_visits: max } = target;
  if (expires == null && max == null) return { id, location: locationFor(url) };
  const limits: CachedLimits = {
    expiresAt: expires == null ? undefined : Date.parse(expires),
    expiresText: expires ?? undefined,
    maxVisits: max ?? undefined,
    exhausted: max != null && (target.visits_used ?? 0) >= max,
  };
  return { id, location: locationFor(url), limits };
}

/** The URL-mapping use cases: shorten, resolve, list, update, delete. */
export class UrlMappingService {
  constructor(
    private readonly repository: UrlMappingRepository,
    private readonly cache: RedirectCache,
    private readonly clicks: ClickBuffer,
    private readonly options: UrlMappingServiceOptions,
  ) {}

  /** `POST /shorten`: the mapping as given, owned by `caller` when signed in. */
  async shorten(input: NewUrlMappingBody, caller?: Caller): Promise<UrlMappingView> {
    this.assertMayCreate(caller);
    const { expires_at, max_visits, ...fields } = input;
    assertCodeNotReserved(fields.code, this.options.reservedCodes());
    assertValidTargetUrl(fields.url, this.options.rules);
    assertValidClickCount(fields.click_count);
    const limits = parseLinkLimits({ expires_at, max_visits }, this.now(), true);
    const created = await this.insert(
      { ...fields, ...limits, created_at: normaliseCreatedAt(fields.created_at) },
      caller,
    );
    return visibleTo(caller, created);
  }

  /**
   * `POST /api/v1/links`: created now with no clicks; with a generated code (CODE_LENGTH random
   * letters and digits, never a reserved word, tried again on a collision) when none is given.
   */
  async create(input: NewLink, caller?: Caller): Promise<UrlMappingView> {
    this.assertMayCreate(caller);
    assertValidTargetUrl(input.url, this.options.rules);
    const now = this.now();
    const limits = parseLinkLimits(input, now, true);
    const created_at = new Date(now).toISOString();
    const mapping = (code: string): NewUrlMapping => ({
      code,
      url: input.url,
      created_at: normaliseCreatedAt(created_at),
      click_count: 0,
      ...limits,
    });
    if (input.code !== undefined) {
      assertCodeNotReserved(input.code, this.options.reservedCodes());
      return visibleTo(caller, await this.insert(mapping(input.code), caller));
    }
    const generate = this.options.generateCode ?? randomCode;
    const length = this.options.codeLength ?? DEFAULT_CODE_LENGTH;
    for (let attempt = 0; attempt < CODE_ATTEMPTS; attempt++) {
      const code = generate(length);
      if (this.options.reservedCodes().has(code.toLowerCase())) continue;
      try {
        return visibleTo(caller, await this.insert(mapping(code), caller));
      } catch (error) {
        if (!(error instanceof AppError && error.code === errors.codeConflict.code)) throw error;
      }
    }
    throw errors.codeGenerationFailed();
  }

  /**
   * The `Location` for `code`, counting the click unless `count` is false (HEAD), and recording
   * the visit of `request` when counted. On a cache hit this never touches the database.
   */
  resolve(
    code: string,
    count: boolean,
    rawHeaders?: readonly string[],
    address?: string,
  ): CachedTarget | Promise<CachedTarget> {
    const cached = this.cache.peek(code);
    if (cached === null) throw errors.mappingNotFound();
    // The hot path: a cached link without limits (most), as before limits existed.
    if (cached !== undefined && cached.limits === undefined) {
      if (count) this.count(cached, rawHeaders, address);
      return cached;
    }
    const target = cached ?? this.cache.load(code, () => this.loadTarget(code));
    return target instanceof Promise
      ? target.then((t) => this.found(code, t, count, rawHeaders, address))
      : this.found(code, target, count, rawHeaders, address);
  }

  /**
   * Mappings in id order (or `query.sort`'s); `nextAfter` is set when rows beyond this page exist.
   * Under the `owned` policy a user sees only their own, an administrator all of them.
   */
  async list(query: ListQuery, caller?: Caller): Promise<{ mappings: UrlMappingView[]; nextAfter?: number }> {
    const { mine, ...options } = query;
    let owner: number | undefined;
    if (mine || this.policy() === 'owned') {
      if (caller === undefined) throw errors.notAuthenticated();
      if (mine || caller.role !== 'admin') owner = caller.userId;
    }
    const { mappings, more } = await this.clicks.readCounts(
      () =>
        fetchPage(options.limit, (limit) =>
          this.repository.list({ ...options, limit, ...(owner === undefined ? {} : { owner }) }),
        ),
      ({ items, more }, pending) => ({
        mappings: items.map((row) => visibleTo(caller, withPendingClicks(row, pending))),
        more,
      }),
    );
    return more ? { mappings, nextAfter: mappings[mappings.length - 1]!.id } : { mappings };
  }

  async update(code: string, body: UrlMappingChangesBody, caller?: Caller): Promise<UrlMappingView> {
    const { expires_at, max_visits, ...changes } = body;
    if (changes.code != null) assertCodeNotReserved(changes.code, this.options.reservedCodes());
    if (changes.url != null) assertValidTargetUrl(changes.url, this.options.rules);
    if (changes.click_count != null) assertValidClickCount(changes.click_count);
    // A PATCH may set an expiry in the past: the link stops answering at once (and says so).
    const limits = parseLinkLimits({ expires_at, max_visits }, this.now(), false);
    const normalised: UrlMappingChanges = {
      ...changes,
      ...limits,
      created_at: changes.created_at == null ? null : normaliseCreatedAt(changes.created_at),
    };
    const { current, guard } = await this.authorise(code, caller);
    if (changes.click_count != null) await this.clicks.discard(current.id);
    const events = this.options.events;
    const updated = await this.clicks.readCounts(
      () =>
        this.repository.update(
          code,
          normalised,
          events && ((row) => [events.updated(code, row)]),
          guard,
          events?.expired,
        ),
      (row, pending) => row && withPendingClicks(row, pending),
    );
    this.cache.invalidate(code);
    if (updated === undefined) throw errors.mappingNotFound();
    if (updated.code !== code) this.cache.invalidate(updated.code);
    return visibleTo(caller, updated);
  }

  async delete(code: string, caller?: Caller): Promise<void> {
    const { guard } = await this.authorise(code, caller);
    const events = this.options.events;
    const id = await this.repository.delete(
      code,
      events && ((deleted) => [events.deleted(deleted, code, guard.owner)]),
      guard,
    );
    this.cache.invalidate(code);
    if (id === undefined) throw errors.mappingNotFound();
    await this.clicks.discard(id);
  }

  /**
   * Records `url.expired` for up to `limit` links whose `expires_at` has passed and that nobody
   * visited since (a visit answers 410 without a word); how many. Any number of instances may
   * run it at once: each link is claimed by one (see `UrlMappingRepository.expireDue`).
   */
  expireDue(limit: number): Promise<number> {
    return this.repository.expireDue(limit, this.options.events?.expired);
  }

  private now(): number {
    return this.options.clock?.now() ?? Date.now();
  }

  private policy(): LinkWritePolicy {
    return this.options.writePolicy?.() ?? 'open';
  }

  private assertMayCreate(caller: Caller | undefined): void {
    if (caller === undefined && this.policy() === 'owned') throw errors.notAuthenticated();
  }

  /** Inserts with `caller` as the owner; a cached "unknown code" is dropped. */
  private async insert(mapping: NewUrlMapping, caller: Caller | undefined): Promise<UrlMapping> {
    const events = this.options.events;
    const created = await this.repository.create(
      { ...mapping, owner: caller?.userId ?? null },
      events && ((row) => [events.created(row)]),
    );
    this.cache.invalidate(created.code);
    return created;
  }

  /**
   * Whether `caller` may change or delete the mapping of `code`, and the owner it must still have
   * when the change runs. An owned mapping: its owner and administrators; anyone else gets 404
   * when anonymous (as if it were not there, the spec's only answer) and 403 when signed in.
   * An anonymous mapping: anyone under `open`; under `owned`, administrators (anonymous: 401).
   */
  private async authorise(
    code: string,
    caller: Caller | undefined,
  ): Promise<{ current: UrlMapping; guard: OwnerGuard }> {
    const owned = this.policy() === 'owned';
    if (caller === undefined && owned) throw errors.notAuthenticated();
    const current = await this.repository.findByCode(code);
    if (current === undefined) throw errors.mappingNotFound();
    const owner = current.owner ?? null;
    if (owner !== null || owned) {
      if (caller === undefined) throw errors.mappingNotFound();
      if (!isOwnerOrAdmin(caller, owner)) throw errors.notLinkOwner();
    }
    return { current, guard: { owner } };
  }

  /** At once when the repository answers at once (SQLite). */
  private loadTarget(code: string): CachedTarget | undefined | Promise<CachedTarget | undefined> {
    const target = this.repository.findTarget(code);
    return target instanceof Promise ? target.then(cachedTarget) : cachedTarget(target);
  }

  private found(
    code: string,
    target: CachedTarget | undefined,
    count: boolean,
    rawHeaders: readonly string[] | undefined,
    address: string | undefined,
    reloaded = false,
  ): CachedTarget | Promise<CachedTarget> {
    if (target === undefined) throw errors.mappingNotFound();
    if (target.limits !== undefined) {
      return this.limited(code, target, target.limits, count, rawHeaders, address, reloaded);
    }
    if (count) this.count(target, rawHeaders, address);
    return target;
  }

  /**
   * A redirect answered 302 to a GET (every path that answers one comes here): its click (a bot's
   * too, unless COUNT_BOTS=false) and its visit.
   */
  private count(target: CachedTarget, rawHeaders: readonly string[] | undefined, address: string | undefined): void {
    const { visits, isBot } = this.options;
    if (isBot === undefined || rawHeaders === undefined || !isBot(rawHeader(rawHeaders, 'user-agent'))) {
      this.clicks.record(target.id);
    }
    if (visits !== undefined && rawHeaders !== undefined) visits.record(target.id, rawHeaders, address);
  }

  /**
   * A link with limits: 410 past `expires_at` or once its visits are used up, counting nothing.
   * A GET of a link with `max_visits` reserves its visit in the database first (exact across
   * instances; every 302 answered counts, bots too); HEAD reserves nothing.
   */
  private limited(
    code: string,
    target: CachedTarget,
    limits: CachedLimits,
    count: boolean,
    rawHeaders: readonly string[] | undefined,
    address: string | undefined,
    reloaded: boolean,
  ): CachedTarget | Promise<CachedTarget> {
    if (limits.expiresAt !== undefined && limits.expiresAt <= this.now()) throw errors.linkExpired(limits.expiresText!);
    const max = limits.maxVisits;
    if (max === undefined) {
      if (count) this.count(target, rawHeaders, address);
      return target;
    }
    if (limits.exhausted) throw errors.linkExhausted(max);
    if (!count) return target;
    return this.repository.reserveVisit(target.id, this.options.events?.expired).then(({ granted, remaining }) => {
      // This entry knows from now on (until a change reloads it) that nothing is left.
      if (remaining === 0) limits.exhausted = true;
      if (granted) {
        this.count(target, rawHeaders, address);
        return target;
      }
      if (reloaded) throw errors.linkExhausted(max);
      // Refused: the entry may be older than a change made elsewhere (a limit raised or cleared,
      // an expiry moved) whose event has not arrived yet. The link as stored now decides, once.
      this.cache.invalidate(code);
      const fresh = this.cache.load(code, () => this.loadTarget(code));
      return fresh instanceof Promise
        ? fresh.then((t) => this.found(code, t, count, rawHeaders, address, true))
        : this.found(code, fresh, count, rawHeaders, address, true);
    });
  }
}
