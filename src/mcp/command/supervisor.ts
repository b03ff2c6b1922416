import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { AppError } from '../../errors.js';
import { MIN_SCRUBBED_KEY_LENGTH, scrubTextOfAll } from '../../upstream/scrub.js';
import { VERSION } from '../../version.js';
import { SupervisedChild } from './child.js';
import { minimalEnv } from './env.js';
import { readProcStat } from './proc.js';
import { reapRecorded } from './reap.js';
import { ChildRecord } from './record.js';
import type { ChildExit, CommandChild, CommandSpec, CrashLoopOptions, ExitReason, SupervisorOptions } from './types.js';
import { Watchdog } from './watchdog.js';

export type { ChildExit, CommandChild, CommandSpec, CrashLoopOptions, ExitReason, SupervisorOptions } from './types.js';

/** The defaults of the command servers' bounds (docs/mcp.md, Command servers: processes). */
export const COMMAND_DEFAULTS = {
  idleTimeoutMs: 10 * 60_000,
  maxPerInstance: 16,
  maxTotal: 64,
  maxLineBytes: 16 * 1024 * 1024,
} as const;

export const CRASH_LOOP_DEFAULTS: CrashLoopOptions = { crashes: 5, windowMs: 60_000, backoffMs: 10_000, maxBackoffMs: 5 * 60_000 };

/** What a busy answer tells the app to wait before it tries again. */
export const BUSY_RETRY_AFTER_S = 5;

/** The exits that count towards a crash loop: the server's own failures, not svc ending it. */
const FAILURES: ReadonlySet<string> = new Set<ExitReason>(['crash', 'spawn_failed', 'line_too_long', 'not_json_rpc', 'stdin_full']);

interface InstanceState {
  live: Set<SupervisedChild>;
  starting: number;
  lastExit: ChildExit | null;
  failures: number[];
  lastFailureAt: number;
  backoffUntil: number;
  nextBackoffMs: number;
  why: string;
}

/**
 * Runs command MCP servers, one process per key (an app's session or grant): each in a process
 * group of its own, with a minimal environment and no shell, bounded in number per instance and
 * in all, ended when idle, when it misbehaves, when asked, and when svc stops, never left
 * behind (a watchdog ends them if svc dies, and the record lets the next start end the rest).
 */
export class CommandSupervisor {
  private readonly instances = new Map<string, InstanceState>();
  /** children of tryOnce, outside the bounds but ended with the rest */
  private readonly trials = new Set<SupervisedChild>();
  private readonly record: ChildRecord;
  private readonly watchdog: Watchdog;
  private readonly clock: () => number;
  private readonly crashLoop: CrashLoopOptions;
  private starting = 0;
  private stopping = false;

  constructor(private readonly opts: SupervisorOptions) {
    this.clock = opts.clock ?? Date.now;
    this.crashLoop = { ...CRASH_LOOP_DEFAULTS, ...opts.crashLoop };
    this.record = new ChildRecord(opts.recordFile);
    this.watchdog = new Watchdog(opts.logger, () => this.allChildren().map((c) => c.pid));
  }

  /** The watchdog's pid while it runs (for tests and `svc status`). */
  get watchdogPid(): number | undefined {
    return this.watchdog.pid;
  }

  async start(instanceId: string, key: string, spec: CommandSpec, secrets: string[]): Promise<CommandChild> {
    if (this.stopping) throw busy('svc is stopping; no command server is started.');
    const state = this.state(instanceId);
    this.refuseWhileBackingOff(state);
    this.refuseOverBounds(state);
    state.starting++;
    this.starting++;
    let released = false;
    // the slot is counted as starting until the child is counted as live, never both
    const release = () => {
      if (released) return;
      released = true;
      state.starting--;
      this.starting--;
    };
    try {
      return await this.spawnChild(instanceId, key, spec, secrets, state, release);
    } finally {
      release();
    }
  }

  async tryOnce(spec: CommandSpec, secrets: string[], timeoutMs: number): Promise<{ ok: true } | { ok: false; message: string }> {
    let child: SupervisedChild;
    try {
      child = await this.spawnChild('', 'try', spec, secrets, null, () => undefined);
    } catch (err) {
      return { ok: false, message: (err as Error).message };
    }
    try {
      return await firstAnswer(child, spec, secrets, timeoutMs);
    } finally {
      await child.close();
    }
  }

  status(instanceId: string): { live: number; last_exit: ChildExit | null; status: string } {
    const state = this.instances.get(instanceId);
    if (!state) return { live: 0, last_exit: null, status: 'not running' };
    return { live: state.live.size, last_exit: state.lastExit, status: this.describe(state) };
  }

  totalLive(): number {
    let n = 0;
    for (const state of this.instances.values()) n += state.live.size;
    return n;
  }

  async stopInstance(instanceId: string): Promise<void> {
    await Promise.all([...(this.instances.get(instanceId)?.live ?? [])].map((c) => c.close()));
  }

  /** Ends the children whose key starts with `prefix` (a grant's), or only those of the instances `of` picks. */
  async stopKeys(prefix: string, of: (instanceId: string) => boolean = () => true): Promise<void> {
    await Promise.all(this.sessionChildren().filter((c) => c.key.startsWith(prefix) && of(c.instanceId)).map((c) => c.close()));
  }

  /** Every child ended (TERM to each group, KILL after 1.5 s), then the watchdog; no child starts after. */
  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.allChildren().map((c) => c.close()));
    this.watchdog.close();
    await this.record.flushed();
  }

  /** At a start, before any child: ends the groups a previous svc left running, and clears the record. */
  async reapLeftovers(): Promise<number> {
    const ended = await reapRecorded(this.opts.recordFile, this.opts.logger);
    await this.record.save();
    return ended;
  }

  private state(instanceId: string): InstanceState {
    let state = this.instances.get(instanceId);
    if (!state) {
      state = { live: new Set(), starting: 0, lastExit: null, failures: [], lastFailureAt: 0, backoffUntil: 0, nextBackoffMs: this.crashLoop.backoffMs, why: '' };
      this.instances.set(instanceId, state);
    }
    return state;
  }

  private sessionChildren(): SupervisedChild[] {
    return [...this.instances.values()].flatMap((s) => [...s.live]);
  }

  private allChildren(): SupervisedChild[] {
    return [...this.sessionChildren(), ...this.trials];
  }

  private refuseWhileBackingOff(state: InstanceState) {
    const wait = state.backoffUntil - this.clock();
    if (wait <= 0) return;
    throw new AppError('mcp_server_backoff', `The command server keeps failing (${state.why}); svc starts it again in ${Math.ceil(wait / 1000)} s.`, {
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(wait / 1000))) },
      expose: true,
    });
  }

  private refuseOverBounds(state: InstanceState) {
    if (state.live.size + state.starting >= this.opts.maxPerInstance) {
      throw busy(`This MCP server already runs ${this.opts.maxPerInstance} processes, as many as svc allows one server; try again later.`);
    }
    if (this.totalLive() + this.starting >= this.opts.maxTotal) {
      throw busy(`svc already runs ${this.opts.maxTotal} command server processes, as many as it allows; try again later.`);
    }
  }

  /** Spawns the child with no shell in a group of its own, tells the watchdog, and records it durably before handing it out. */
  private async spawnChild(
    instanceId: string,
    key: string,
    spec: CommandSpec,
    secrets: string[],
    state: InstanceState | null,
    spawned: () => void,
  ): Promise<SupervisedChild> {
    let proc: ChildProcess;
    try {
      proc = spawnDetached(spec);
    } catch (err) {
      // a command line no process can have (an empty program, a NUL byte): node refuses it at once
      spawned();
      throw this.spawnFailed(instanceId, state, `Cannot run ${commandName(spec, secrets)}: ${(err as Error).message.split('. Received')[0]}.`);
    }
    if (proc.pid === undefined) {
      spawned();
      throw this.spawnFailed(instanceId, state, await spawnFailure(proc, spec, secrets));
    }
    const child = this.supervise(proc, instanceId, key, scrubbable(secrets), state);
    spawned();
    this.watchdog.add(child.pid);
    try {
      await this.record.add({ pid: child.pid, pgid: child.pid, start: readProcStat(child.pid)?.start ?? null, instance: instanceId, at: new Date(this.clock()).toISOString() });
    } catch (err) {
      await child.close();
      throw new AppError('store_unavailable', 'svc could not record the command server it started, so it ended it.', { cause: err });
    }
    return child;
  }

  /** A start that ran nothing: it counts as a failure of the instance, and is said in the log. */
  private spawnFailed(instanceId: string, state: InstanceState | null, message: string): AppError {
    if (state) this.onChildExit(state, { code: null, signal: null, at: new Date(this.clock()).toISOString(), reason: 'spawn_failed' });
    this.opts.logger.warn({ mcp_instance: instanceId || undefined, message }, 'command server could not start');
    return new AppError('mcp_server_failed', message, { expose: true });
  }

  private supervise(proc: ChildProcess, instanceId: string, key: string, secrets: string[], state: InstanceState | null): SupervisedChild {
    const child = new SupervisedChild(proc, {
      instanceId,
      key,
      logger: this.opts.logger,
      secrets,
      maxLineBytes: this.opts.maxLineBytes,
      idleTimeoutMs: state ? this.opts.idleTimeoutMs : 2 ** 31 - 1,
      clock: this.clock,
      onExit: (_c, exit) => {
        this.logExit(instanceId, child.pid, exit);
        if (state) this.onChildExit(state, exit);
      },
      onGone: (c) => {
        state?.live.delete(c);
        this.trials.delete(c);
        this.watchdog.remove(c.pid);
        void this.record.remove(c.pid).catch((err: unknown) => this.opts.logger.warn({ err: (err as Error).message }, 'cannot update the record of command servers'));
      },
    });
    if (state) state.live.add(child);
    else this.trials.add(child);
    return child;
  }

  private logExit(instanceId: string, pid: number, exit: ChildExit) {
    const fields = { mcp_instance: instanceId || undefined, pid, code: exit.code, signal: exit.signal, reason: exit.reason };
    if (FAILURES.has(exit.reason)) this.opts.logger.warn(fields, 'command server ended');
    else this.opts.logger.info(fields, 'command server ended');
  }

  /** Keeps the last exit, and backs the instance off when its failures come too fast. */
  private onChildExit(state: InstanceState, exit: ChildExit) {
    state.lastExit = exit;
    if (!FAILURES.has(exit.reason)) return;
    const now = this.clock();
    const { crashes, windowMs, backoffMs, maxBackoffMs } = this.crashLoop;
    // a whole window without a failure (after the last wait) starts the waits from the first again
    if (now > Math.max(state.lastFailureAt, state.backoffUntil) + windowMs) state.nextBackoffMs = backoffMs;
    state.lastFailureAt = now;
    state.failures = [...state.failures.filter((t) => now - t < windowMs), now];
    if (state.failures.length < crashes) return;
    state.backoffUntil = now + state.nextBackoffMs;
    state.why = `${state.failures.length} failures within ${Math.round(windowMs / 1000)} s, the last ${describeExit(exit)}`;
    state.nextBackoffMs = Math.min(state.nextBackoffMs * 2, maxBackoffMs);
    state.failures = [];
    this.opts.logger.warn({ reason: state.why, retry_in_s: Math.ceil((state.backoffUntil - now) / 1000) }, 'command server crash loop: backing off');
  }

  private describe(state: InstanceState): string {
    const wait = state.backoffUntil - this.clock();
    if (wait > 0) return `backing off for ${Math.ceil(wait / 1000)} s: ${state.why}`;
    if (state.live.size > 0) return 'running';
    if (state.lastExit && FAILURES.has(state.lastExit.reason)) return `not running; the last one ${describeExit(state.lastExit)}`;
    return 'not running';
  }
}

/** The child with no shell, leading a session and process group of its own, with the minimal environment. */
function spawnDetached(spec: CommandSpec): ChildProcess {
  return spawn(spec.command, spec.args, {
    cwd: spec.cwd ?? undefined,
    env: minimalEnv(spec.env),
    detached: true,
    shell: false,
    stdio: ['pipe', 'pipe', 'pipe'],
    windowsHide: true,
  });
}

// their messages name no secret (a command's is scrubbed): the app is told why
const busy = (message: string) => new AppError('mcp_servers_busy', message, { headers: { 'Retry-After': String(BUSY_RETRY_AFTER_S) }, expose: true });

/** Only values long enough to be secrets are scrubbed from what a child writes (short ones would blot out the log). */
const scrubbable = (secrets: string[]) => [...new Set(secrets)].filter((s) => s.length >= MIN_SCRUBBED_KEY_LENGTH);

/** How an exit reads in a status or a message: "exited with code 1", "was killed by SIGSEGV", "wrote output that is not JSON-RPC". */
export function describeExit(exit: ChildExit): string {
  switch (exit.reason) {
    case 'line_too_long':
      return 'wrote a line longer than the limit';
    case 'not_json_rpc':
      return 'wrote output that is not JSON-RPC';
    case 'stdin_full':
      return 'stopped reading its input';
    case 'spawn_failed':
      return 'could not be started';
    case 'idle':
      return 'was idle too long';
    case 'stopped':
      return 'was stopped';
  }
  if (exit.signal) return `was killed by ${exit.signal}`;
  return `exited with code ${exit.code}`;
}

/** The message for a command that could not be run at all: not found, not executable, or its directory missing. */
async function spawnFailure(proc: ChildProcess, spec: CommandSpec, secrets: string[]): Promise<string> {
  const err = await new Promise<NodeJS.ErrnoException>((resolve) => proc.once('error', resolve));
  const name = commandName(spec, secrets);
  if (err.code === 'ENOENT' && spec.cwd && !existsSync(spec.cwd)) return `Cannot run ${name}: its working directory ${scrubTextOfAll(spec.cwd, secrets)} does not exist.`;
  if (err.code === 'ENOENT') return `Cannot run ${name}: no such command (ENOENT).`;
  if (err.code === 'EACCES') return `Cannot run ${name}: permission denied (EACCES).`;
  return `Cannot run ${name}: ${err.code ?? err.message}.`;
}

const commandName = (spec: CommandSpec, secrets: string[]) => JSON.stringify(scrubTextOfAll(spec.command, scrubbable(secrets)));

/** Sends `initialize` and waits for an answer (any JSON-RPC answer to it: the server runs and speaks the protocol), its exit, or the time to run out. */
function firstAnswer(child: SupervisedChild, spec: CommandSpec, secrets: string[], timeoutMs: number): Promise<{ ok: true } | { ok: false; message: string }> {
  const name = commandName(spec, secrets);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ ok: false, message: `${name} did not answer initialize within ${timeoutMs} ms.` }), timeoutMs);
    const done = (answer: { ok: true } | { ok: false; message: string }) => {
      clearTimeout(timer);
      resolve(answer);
    };
    child.onmessage = (m) => {
      if ('id' in m && m.id === 1 && ('result' in m || 'error' in m)) done({ ok: true });
    };
    child.onexit = (exit) => {
      // 127: what the exec of a program that is not one (no execute bit, a bad interpreter) leaves
      const hint = exit.code === 127 && !child.stderr.last ? ' (it could not be run: not a program, or not executable)' : '';
      const said = child.stderr.last ? `: ${child.stderr.last}` : '';
      done({ ok: false, message: `${name} ${describeExit(exit)}${hint} before it answered initialize${said}` });
    };
    if (child.ended) return;
    child.send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'svc', version: VERSION } },
    });
  });
}
