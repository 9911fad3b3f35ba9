import { isbot } from 'isbot';
import { LRUCache } from 'lru-cache';
import { UAParser } from 'ua-parser-js';
import type { DeviceClass } from '../domain/visit.js';

/** What a visit keeps of a `User-Agent`. */
export interface UserAgentClass {
  readonly browser: string | null;
  readonly os: string | null;
  readonly device: DeviceClass;
  readonly bot: boolean;
}

/** Parsing a `User-Agent` takes ~20 µs; most visits repeat one of a few thousand. */
const CACHE_ENTRIES = 10_000;
/** Longer ones are cut before parsing and caching (no browser needs more to be recognised). */
const MAX_LENGTH = 512;

const UNKNOWN: UserAgentClass = { browser: null, os: null, device: 'other', bot: false };

/**
 * `User-Agent` → browser, OS, device class (ua-parser-js 1.x, MIT) and bot flag (isbot), each
 * answer cached (LRU). Run at flush time, never on the redirect path; `isBot` alone is cheap
 * enough for it (COUNT_BOTS=false) and shares the cache.
 */
export class UserAgentClassifier {
  private readonly cache = new LRUCache<string, UserAgentClass>({ max: CACHE_ENTRIES });
  private readonly bots = new LRUCache<string, boolean>({ max: CACHE_ENTRIES });

  classify(userAgent: string | undefined): UserAgentClass {
    if (userAgent === undefined || userAgent === '') return UNKNOWN;
    const key = userAgent.length > MAX_LENGTH ? userAgent.slice(0, MAX_LENGTH) : userAgent;
    let found = this.cache.get(key);
    if (found === undefined) {
      found = parse(key);
      this.cache.set(key, found);
    }
    return found;
  }

  isBot(userAgent: string | undefined): boolean {
    if (userAgent === undefined || userAgent === '') return false;
    let bot = this.bots.get(userAgent);
    if (bot === undefined) {
      bot = isbot(userAgent);
      this.bots.set(userAgent, bot);
    }
    return bot;
  }
}

function parse(userAgent: string): UserAgentClass {
  const bot = isbot(userAgent);
  const { browser, os, device } = new UAParser(userAgent).getResult();
  const browserName = browser.name ?? null;
  const osName = os.name ?? null;
  return { browser: browserName, os: osName, device: deviceClass(bot, device.type, browserName, osName), bot };
}

function deviceClass(bot: boolean, type: string | undefined, browser: string | null, os: string | null): DeviceClass {
  if (bot) return 'bot';
  if (type === 'mobile' || type === 'tablet') return type;
  // ua-parser-js names no type for desktops; a recognised browser or OS without one is a desktop.
  if (type === undefined && (browser !== null || os !== null)) return 'desktop';
  return 'other';
}
