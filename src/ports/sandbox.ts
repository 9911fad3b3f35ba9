/** What a sandbox run returns. */
export interface SandboxResult {
  readonly status: 'completed' | 'failed' | 'timed_out';
  /** Captured console output, cut at the output limit. */
  readonly output: string;
  /** The script's completion value, as JSON-compatible data (cut to a string past the output limit). */
  readonly result: unknown;
  /** Cut at the output limit too. */
  readonly error: string | null;
  /** Whether output, result or error was cut. */
  readonly truncated: boolean;
  readonly durationMs: number;
}

export interface SandboxLimits {
  readonly timeoutMs: number;
  readonly memoryBytes: number;
  /** Limit of the console output, and of the result's JSON and the error message each. */
  readonly outputBytes: number;
}

/**
 * Runs untrusted JavaScript with no network, file system or host access, within a deadline and
 * a memory cap. A run never throws and never takes the host down; every adapter passes
 * `test/contract/sandbox.contract.test.ts`.
 *
 * @example
 *   const { status, output, result } = await sandbox.run('console.log("hi"); 6 * 7', limits);
 */
export interface Sandbox {
  /** Runs it can do at once; a run beyond that starts when one ends (first come, first served). */
  readonly concurrency: number;
  run(script: string, limits: SandboxLimits): Promise<SandboxResult>;
  close(): Promise<void>;
}
