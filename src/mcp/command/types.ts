import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../../log.js';

export type { JSONRPCMessage };

/** A command line to run with no shell: the program (an absolute path, or a name looked up on PATH), its arguments, its own variables and its directory. */
export interface CommandSpec {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string | null;
}

/**
 * Why a child ended: `crash` (it exited by itself), `spawn_failed` (it could not be run),
 * `line_too_long`, `not_json_rpc`, `stdin_full` (it stopped reading what svc sent), `idle`,
 * `stopped` (svc ended it: its session, grant or instance ended, or svc stopped).
 */
export type ExitReason = 'crash' | 'spawn_failed' | 'line_too_long' | 'not_json_rpc' | 'stdin_full' | 'idle' | 'stopped';

export interface ChildExit {
  code: number | null;
  signal: string | null;
  at: string;
  reason: ExitReason | string;
}

export interface CommandChild {
  readonly pid: number;
  readonly key: string;
  readonly instanceId: string;
  /** Resolves once the child has exited and `onexit` was called. */
  readonly exited: Promise<ChildExit>;
  /** True from the moment svc decided to end it, or it exited. */
  readonly ended: boolean;
  /** One line of JSON to its stdin. Throws `upstream_unavailable` once it has ended. */
  send(message: JSONRPCMessage): void;
  /** Its stdout is read from the moment this is first set (until then the pipe holds what it writes). */
  onmessage?: (message: JSONRPCMessage) => void;
  /** Called once, at its exit; set after the exit, it is called at once. */
  onexit?: (exit: ChildExit) => void;
  /** Ends it (reason `stopped`): stdin closed, TERM to its group, KILL after 1.5 s; resolves when the group is gone. */
  close(): Promise<void>;
}

/** When a run of failures is a crash loop, and how long starts are refused then. */
export interface CrashLoopOptions {
  /** this many failed exits of an instance... */
  crashes: number;
  /** ...within this long make a loop */
  windowMs: number;
  /** the first wait; each loop after doubles it... */
  backoffMs: number;
  /** ...up to this */
  maxBackoffMs: number;
}

export interface SupervisorOptions {
  /** `<dataDir>/command-children.json`: what was started (pid, group, start time, instance) */
  recordFile: string;
  logger: Logger;
  /** at most this many processes of one instance (`--stdio-max-processes`) */
  maxPerInstance: number;
  /** and in all */
  maxTotal: number;
  /** a child with no message either way for this long is ended (`--stdio-idle-timeout`) */
  idleTimeoutMs: number;
  /** a stdout line longer than this ends the child (16 MiB by default) */
  maxLineBytes: number;
  clock?: () => number;
  crashLoop?: Partial<CrashLoopOptions>;
}
