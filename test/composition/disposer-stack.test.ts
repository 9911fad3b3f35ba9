import { describe, expect, it } from 'vitest';
import { DisposerStack } from '../../src/composition/disposer-stack.js';

function recording() {
  const errors: { object: unknown; message: string }[] = [];
  return { errors, logger: { error: (object: unknown, message: string) => errors.push({ object, message }) } };
}

describe('DisposerStack', () => {
  it('closes in reverse order of registration, waiting for each', async () => {
    const closed: string[] = [];
    const stack = new DisposerStack(recording().logger);
    const database = stack.use('database', { close: async () => void closed.push('database') });
    stack.defer('clicks', async () => {
      await new Promise((resolve) => setTimeout(resolve, 10));
      closed.push('clicks');
    });
    stack.defer('http', () => void closed.push('http'));
    expect(typeof database.close).toBe('function');
    await stack.dispose();
    expect(closed).toEqual(['http', 'clicks', 'database']);
  });

  it('runs every disposer even when one fails, and logs the failure with its name', async () => {
    const closed: string[] = [];
    const { errors, logger } = recording();
    const stack = new DisposerStack(logger);
    const failure = new Error('broker away');
    stack.defer('database', () => void closed.push('database'));
    stack.defer('event bus', () => Promise.reject(failure));
    stack.defer('sandbox', () => {
      throw new Error('already closed');
    });
    stack.defer('http', () => void closed.push('http'));
    await stack.dispose();
    expect(closed).toEqual(['http', 'database']);
    expect(errors.map((e) => (e.object as { step: string }).step)).toEqual(['sandbox', 'event bus']);
    expect(errors[1]).toEqual({ object: { err: failure, step: 'event bus' }, message: 'shutdown step failed' });
  });

  it('disposes once: a second call waits for the first and closes nothing again', async () => {
    let closes = 0;
    const stack = new DisposerStack(recording().logger);
    stack.defer('database', async () => {
      await new Promise((resolve) => setTimeout(resolve, 10));
      closes++;
    });
    const first = stack.dispose();
    const second = stack.dispose();
    await Promise.all([first, second]);
    await stack.dispose();
    expect(closes).toBe(1);
    expect(() => stack.defer('late', () => undefined)).toThrow(/after the stack was disposed/);
  });
});
