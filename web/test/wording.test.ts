import { describe, expect, it } from 'vitest';
import {
  channelErrorText,
  deadLetterStatusLabel,
  executionStatusLabel,
  outputText,
  pageNameOf,
} from '../src/lib/wording';

describe('wording for people', () => {
  it('names execution statuses in words', () => {
    expect(executionStatusLabel('queued')).toBe('Waiting to run');
    expect(executionStatusLabel('timed_out')).toBe('Ran out of time');
    expect(executionStatusLabel('completed')).toBe('Finished');
  });

  it('names dead-letter statuses in words', () => {
    expect(deadLetterStatusLabel('parked')).toBe('Waiting for a decision');
    expect(deadLetterStatusLabel('retried')).toBe('Sent again');
  });

  it('says why there is no output: not yet, or none at all once finished', () => {
    expect(outputText('', false)).toBe('Nothing printed yet.');
    expect(outputText('', true)).toBe('The script printed nothing.');
    expect(outputText('hi\n', true)).toBe('hi\n');
  });

  it('names the page a login goes back to, never its address', () => {
    expect(pageNameOf('/app/links')).toBe('your links');
    expect(pageNameOf('/app/links?after=0')).toBe('your links');
    expect(pageNameOf('/app/links/abc1234/stats?range=7d')).toBe('the statistics of abc1234');
    expect(pageNameOf('/app/admin/dead-letters/')).toBe('the dead letters');
    expect(pageNameOf('/app/elsewhere')).toBe('the page you asked for');
  });

  it("words the server's channel refusals for people", () => {
    expect(
      channelErrorText(
        "body: 'url' Destination not allowed: 127.0.0.1 is a loopback, private, link-local or reserved address",
      ),
    ).toBe(
      'Notifications cannot be sent to 127.0.0.1: it is a private or local network address. Use an address that is reachable from the internet.',
    );
    expect(channelErrorText("body: 'url' host nowhere.invalid cannot be resolved")).toBe(
      'No server called nowhere.invalid could be found. Check the URL.',
    );
    expect(channelErrorText('body: name must be at most 100 characters')).toBe(
      'The name must be at most 100 characters.',
    );
    expect(channelErrorText('Rate limit exceeded')).toBe('Rate limit exceeded');
  });
});
