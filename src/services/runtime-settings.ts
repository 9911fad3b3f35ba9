import { canonicalTimestamp } from '../domain/timestamp.js';
import { errors } from '../domain/errors.js';
import {
  type AuthSettingValues,
  type LinkSettingValues,
  type RuntimeSettingDefinition,
  type RuntimeSettingValue,
  type RuntimeSettingValues,
  settingProblem,
} from '../domain/settings.js';
import type { Clock } from '../ports/clock.js';
import type { Counters } from '../ports/counters.js';
import type { SettingsRepository } from '../ports/settings-repository.js';

/** The values in force: the account and link settings by their names, and the others'. */
type InForce = RuntimeSettingValues & AuthSettingValues & Partial<LinkSettingValues>;

/** The counters key whose version announces a settings change to every instance sharing the counters. */
export const SETTINGS_VERSION_KEY = 'settings:version';

/** While the change signal is away, how often the settings are reloaded from the database. */
const SIGNAL_LOST_RELOAD_MS = 1000;

export interface RuntimeSettingsLogger {
  warn(object: unknown, message: string): void;
  error(object: unknown, message: string): void;
}

export interface RuntimeSettingsOptions {
  readonly definitions: readonly RuntimeSettingDefinition[];
  /** Values in force until an administrator changes them (from the configuration). */
  readonly defaults: Readonly<Record<string, RuntimeSettingValue>>;
  readonly repository: SettingsRepository;
  /**
   * Counters every instance shares (Redis, or the primary of `--workers N`): a version in them
   * announces a change. Absent when the counters are this process's own; the version the
   * repository raises with every change is polled instead.
   */
  readonly counters?: Counters;
  readonly clock: Clock;
  /** How often the change signal is polled; keeps every instance within one second of a change. */
  readonly pollIntervalMs: number;
  readonly logger: RuntimeSettingsLogger;
}

/**
 * The runtime settings in force on this instance: read from memory on every use, persisted in the
 * database, and reloaded when the change signal (a version in the shared counters, or else the
 * version stored with the settings) moves, so a change made on any instance applies on all of
 * them within one poll interval.
 */
export class RuntimeSettings {
  private values: InForce;
  private seenVersion = -1;
  private signalLost = false;
  private loadFailing = false;
  private lastLoadAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private readonly byName: ReadonlyMap<string, RuntimeSettingDefinition>;
  private readonly listeners: Array<(values: RuntimeSettingValues) => void> = [];

  constructor(private readonly options: RuntimeSettingsOptions) {
    this.byName = new Map(options.definitions.map((d) => [d.name, d]));
    for (const definition of options.definitions) {
      const problem = settingProblem(definition, options.defaults[definition.name]);
      if (problem) throw new Error(`runtime setting default: ${problem}`);
    }
    this.values = Object.freeze({ ...options.defaults }) as InForce;
  }

  get definitions(): readonly RuntimeSettingDefinition[] {
    return this.options.definitions;
  }

  /** Loads the stored values and starts following changes. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer ??= setInterval(() => void this.poll(), this.options.pollIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.polling;
  }

  /**
   * Calls `listener` with the values in force after every load that changed them, on this
   * instance (for concerns that keep derived state, such as rate-limit policies).
   */
  onChange(listener: (values: RuntimeSettingValues) => void): void {
    this.listeners.push(listener);
  }

  /** The values in force now. */
  current(): InForce {
    return this.values;
  }

  /**
   * Validates, persists and announces a change; returns the values in force afterwards.
   * Throws a 422 naming the first unknown setting or value out of range.
   */
  async update(changes: Readonly<Record<string, unknown>>): Promise<RuntimeSettingValues> {
    for (const [name, value] of Object.entries(changes)) {
      const definition = this.byName.get(name);
      if (!definition) throw errors.validation(`body: unknown field '${name}'`);
      const problem = settingProblem(definition, value);
      if (problem) throw errors.validation(`body: ${problem}`);
    }
    const { repository, counters, clock } = this.options;
    const updatedAt = canonicalTimestamp(new Date(clock.now()).toISOString())!;
    const stored = await repository.save(changes as Record<string, RuntimeSettingValue>, updatedAt);
    // Bumped after the write, so an instance that sees the new version reads the new values.
    const version = counters ? await this.bumpSignal(counters) : stored;
    await this.load();
    if (version !== undefined) this.seenVersion = Math.max(this.seenVersion, version);
    return this.values;
  }

  /**
   * Reloads now if the change signal moved since the last load. While the shared counters cannot
   * be read (Redis away), reloads from the database at most once per SIGNAL_LOST_RELOAD_MS
   * instead, and once more when the signal is back.
   */
  async refresh(): Promise<void> {
    const { counters, repository } = this.options;
    // Read before the values, so a change committed in between is loaded now and again next time.
    if (!counters) return this.reloadIfMoved(await repository.version());
    let version: number;
    try {
      version = await counters.version(SETTINGS_VERSION_KEY);
    } catch (error) {
      this.signalFailed(error);
      if (performance.now() - this.lastLoadAt >= SIGNAL_LOST_RELOAD_MS) await this.load();
      return;
    }
    this.signalLost = false;
    await this.reloadIfMoved(version);
  }

  private async reloadIfMoved(version: number): Promise<void> {
    if (version === this.seenVersion) return;
    await this.load();
    this.seenVersion = version;
  }

  /** The shared version after announcing a change; undefined when the counters are away. */
  private async bumpSignal(counters: Counters): Promise<number | undefined> {
    try {
      return await counters.bump(SETTINGS_VERSION_KEY);
    } catch (error) {
      // Saved; the others reload from the database while the signal is away (see refresh).
      this.signalFailed(error);
      return undefined;
    }
  }

  private signalFailed(error: unknown): void {
    this.seenVersion = -1;
    if (this.signalLost) return;
    this.signalLost = true;
    this.options.logger.warn(
      { err: error instanceof Error ? error.message : String(error) },
      'runtime settings change signal unavailable; reloading from the database every second',
    );
  }

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = this.refresh()
      .then(() => {
        this.loadFailing = false;
      })
      .catch((error: unknown) => {
        // Logged once per run of failures (the database away): the poll runs four times a second.
        if (!this.loadFailing) {
          this.options.logger.error({ err: error }, 'runtime settings refresh failed; keeping the values in force');
        }
        this.loadFailing = true;
      })
      .finally(() => {
        this.polling = undefined;
      });
    await this.polling;
  }

  private async load(): Promise<void> {
    const stored = await this.options.repository.load();
    this.lastLoadAt = performance.now();
    const next: Record<string, RuntimeSettingValue> = { ...this.options.defaults };
    for (const [name, value] of Object.entries(stored)) {
      const definition = this.byName.get(name);
      if (!definition) continue; // a setting this version does not know
      const problem = settingProblem(definition, value);
      if (problem) this.options.logger.warn({ setting: name, value }, `stored runtime setting ignored: ${problem}`);
      else next[name] = value;
    }
    const changed = Object.keys(next).some((name) => next[name] !== this.values[name]);
    this.values = Object.freeze(next) as InForce;
    if (changed) for (const listener of this.listeners) listener(this.values);
  }
}
