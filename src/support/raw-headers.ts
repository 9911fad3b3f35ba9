/**
 * The value of header `name` (lower case) in Node's raw `[name, value, …]` list (`rawHeaders`),
 * the first one; reading it costs no `headers` object, which Node builds on first access.
 */
export function rawHeader(rawHeaders: readonly string[], name: string): string | undefined {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const key = rawHeaders[i]!;
    if (key.length === name.length && key.toLowerCase() === name) return rawHeaders[i + 1];
  }
  return undefined;
}
