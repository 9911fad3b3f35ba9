/**
 * Configuration: read once from the environment at start-up, validated, typed and frozen.
 * No other module reads `process.env`.
 *
 * The entry module of its parts: the settings table (settings.ts, each variable declared once,
 * the README's table generated from it), the parsers of its values (parsers.ts), the loader
 * (loader.ts) and the typed result (types.ts).
 */

export { ConfigError, loadConfig } from './loader.js';
export { SETTINGS, settingsMarkdown, type SettingName } from './settings.js';
export * from './types.js';
