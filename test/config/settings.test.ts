import { describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/config/config.js';

describe('the settings table', () => {
  it('names each setting by its key, so the name is written once', () => {
    for (const [key, setting] of Object.entries(SETTINGS)) expect(setting.name).toBe(key);
  });

  it('mentions in its descriptions only variables it declares', () => {
    const declared = new Set(Object.keys(SETTINGS));
    const mentions = Object.values(SETTINGS).flatMap((setting) =>
      [...setting.description.matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`/g)].map(([, name]) => ({
        in: setting.name,
        name: name!,
      })),
    );
    expect(mentions.length).toBeGreaterThan(5);
    for (const mention of mentions) expect(declared, `${mention.in} mentions ${mention.name}`).toContain(mention.name);
  });
});
