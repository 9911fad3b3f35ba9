import { newQuickJSWASMModule, type QuickJSContext, type QuickJSHandle } from 'quickjs-emscripten';
import { capResult, capText, CUT_MARKERS } from '../../domain/execution.js';
import type { SandboxLimits, SandboxResult } from '../../ports/sandbox.js';

/**
 * One run of a script in a fresh QuickJS WebAssembly module: its own linear memory, capped, an
 * interrupt at the deadline, and nothing of the host but a `console` that writes into a bounded
 * buffer. Runs inside the sandbox thread.
 *
 * QuickJS's own allocation limit does not see every large allocation in this build, so the cap
 * is also enforced on the module's memory, which a fresh module per run starts small. Output,
 * result and error are each cut at the output limit here, so a huge one never leaves the thread.
 */
export async function runInQuickJs(
  script: string,
  limits: SandboxLimits,
  onStart?: () => void,
): Promise<SandboxResult> {
  const quickjs = await newQuickJSWASMModule();
  const memory = quickjs.getWasmMemory();
  const baseline = memory.buffer.byteLength;
  const started = performance.now();
  const deadline = Date.now() + limits.timeoutMs;
  onStart?.();
  const runtime = quickjs.newRuntime();
  runtime.setMemoryLimit(limits.memoryBytes);
  runtime.setMaxStackSize(512 * 1024);
  let interrupted: 'deadline' | 'memory' | undefined;
  runtime.setInterruptHandler(() => {
    if (memory.buffer.byteLength - baseline > limits.memoryBytes) interrupted = 'memory';
    else if (Date.now() > deadline) interrupted = 'deadline';
    return interrupted !== undefined;
  });
  const vm = runtime.newContext();
  const output = new BoundedOutput(limits.outputBytes);
  const finish: Finish = (status, result, error) => {
    const capped = capResult(result, limits.outputBytes);
    const message = error === null ? undefined : capText(error, limits.outputBytes, CUT_MARKERS.error);
    return {
      status,
      output: output.text(),
      result: capped.value,
      error: message?.text ?? null,
      truncated: output.truncated || capped.cut || (message?.cut ?? false),
      durationMs: Math.round(performance.now() - started),
    };
  };
  try {
    installConsole(vm, output);
    const evaluated = vm.evalCode(script, 'script.js');
    if (evaluated.error) return failure(vm, evaluated.error, interrupted, finish);
    let value: QuickJSHandle = evaluated.value;
    // An async script: run its jobs until the promise settles or the deadline interrupts.
    const state = vm.getPromiseState(value);
    if (state.type !== 'fulfilled' || !state.notAPromise) {
      runtime.executePendingJobs();
      const settled = vm.getPromiseState(value);
      value.dispose();
      if (settled.type === 'pending') {
        return interrupted ? interruption(interrupted, finish) : finish('failed', null, 'Promise never settled');
      }
      if (settled.type === 'rejected') return failure(vm, settled.error, interrupted, finish);
      value = settled.value;
    }
    const result = toJson(vm, value);
    value.dispose();
    return finish('completed', result, null);
  } catch (error) {
    // QuickJS itself gave up (out of memory while dumping, …): the run failed, the host goes on.
    return interrupted ? interruption(interrupted, finish) : finish('failed', null, (error as Error).message);
  } finally {
    vm.dispose();
    runtime.dispose();
  }
}

type Finish = (status: SandboxResult['status'], result: unknown, error: string | null) => SandboxResult;

function interruption(reason: 'deadline' | 'memory', finish: Finish): SandboxResult {
  return reason === 'deadline'
    ? finish('timed_out', null, 'Timed out')
    : finish('failed', null, 'Memory limit exceeded');
}

function failure(
  vm: QuickJSContext,
  handle: QuickJSHandle,
  interrupted: 'deadline' | 'memory' | undefined,
  finish: Finish,
): SandboxResult {
  let message: string;
  try {
    const dumped = vm.dump(handle) as { name?: string; message?: string } | string;
    message =
      typeof dumped === 'object' && dumped !== null
        ? `${dumped.name ?? 'Error'}: ${dumped.message ?? ''}`
        : String(dumped);
  } catch {
    message = 'Error';
  } finally {
    handle.dispose();
  }
  return interrupted ? interruption(interrupted, finish) : finish('failed', null, message);
}

function toJson(vm: QuickJSContext, handle: QuickJSHandle): unknown {
  const value: unknown = vm.dump(handle);
  try {
    return value === undefined ? null : (JSON.parse(JSON.stringify(value)) as unknown);
  } catch {
    return String(value);
  }
}

function installConsole(vm: QuickJSContext, output: BoundedOutput): void {
  const consoleObject = vm.newObject();
  for (const level of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    const fn = vm.newFunction(level, (...args) => {
      output.line(args.map((arg) => format(vm.dump(arg))).join(' '));
    });
    vm.setProp(consoleObject, level, fn);
    fn.dispose();
  }
  vm.setProp(vm.global, 'console', consoleObject);
  consoleObject.dispose();
}

function format(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Console output up to a byte limit (the marker included), then a note that the rest was cut. */
class BoundedOutput {
  private readonly parts: string[] = [];
  private bytes = 0;
  truncated = false;

  constructor(private readonly limit: number) {}

  line(text: string): void {
    if (this.truncated) return;
    const line = `${text}\n`;
    this.parts.push(line);
    this.bytes += Buffer.byteLength(line, 'utf8');
    // Past the limit: keep no more (text() cuts what is there to the limit, marker included).
    if (this.bytes > this.limit) this.truncated = true;
  }

  text(): string {
    return capText(this.parts.join(''), this.limit, CUT_MARKERS.output).text;
  }
}
