import type { ChildProcess } from 'node:child_process';
import { AppError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { messagesOfLine } from './jsonrpc.js';
import { LineReader } from './lines.js';
import { endGroup, groupAlive } from './proc.js';
import { StderrLog } from './stderr.js';
import type { ChildExit, CommandChild, ExitReason, JSONRPCMessage } from './types.js';

/** What a child needs of its supervisor: its settings, and the two moments the supervisor counts. */
export interface ChildContext {
  instanceId: string;
  key: string;
  logger: Logger;
  secrets: string[];
  maxLineBytes: number;
  idleTimeoutMs: number;
  clock: () => number;
  /** at its exit, before `onexit` */
  onExit(child: SupervisedChild, exit: ChildExit): void;
  /** once it has exited and nothing of its process group runs */
  onGone(child: SupervisedChild): void;
}

/**
 * What svc holds of messages a child has not read yet: more (a child that stopped reading its
 * stdin) ends it. Twice the largest body an app may send the MCP proxy.
 */
export const STDIN_BACKLOG_BYTES = 8 * 1024 * 1024;

/** After a child exits by itself, what it wrote just before may still be in the pipe: read for this long at most before `onexit`. */
const DRAIN_MS = 100;

/**
 * One command server process: JSON-RPC lines in on stdin and out on stdout, stderr to the log.
 * It owns the process group it leads, and ends the whole group whenever it ends.
 */
export class SupervisedChild implements CommandChild {
  readonly pid: number;
  readonly exited: Promise<ChildExit>;
  readonly gone: Promise<void>;
  /** its stdout lines, bounded by maxLineBytes */
  readonly stdout: LineReader;
  readonly stderr: StderrLog;
  private reason: ExitReason | null = null;
  private exit: ChildExit | null = null;
  private exitNotified = false;
  private goneMarked = false;
  private readonly idle: NodeJS.Timeout;
  private messageHandler?: (message: JSONRPCMessage) => void;
  private exitHandler?: (exit: ChildExit) => void;
  private reading = false;
  private groupEnding: Promise<void> | null = null;
  private resolveExited!: (exit: ChildExit) => void;
  private resolveGone!: () => void;

  constructor(
    private readonly proc: ChildProcess,
    private readonly ctx: ChildContext,
  ) {
    this.pid = proc.pid!;
    this.exited = new Promise((resolve) => (this.resolveExited = resolve));
    this.gone = new Promise((resolve) => (this.resolveGone = resolve));
    this.stdout = new LineReader(ctx.maxLineBytes, 'fail');
    this.stderr = new StderrLog(ctx.logger, { mcp_instance: ctx.instanceId, pid: this.pid }, ctx.secrets, ctx.clock);
    for (const stream of [proc.stdin, proc.stdout, proc.stderr]) stream?.on('error', () => undefined);
    proc.stderr!.on('data', (chunk: Buffer) => this.stderr.push(chunk));
    proc.stderr!.on('end', () => this.stderr.end());
    proc.on('exit', (code, signal) => this.onProcessExit(code, signal));
    // a signal that cannot be sent, or a pipe that fails: said in the log, never thrown at svc
    proc.on('error', (err) => ctx.logger.warn({ err: err.message, mcp_instance: ctx.instanceId || undefined, pid: this.pid }, 'command server process error'));
    this.idle = setTimeout(() => void this.end('idle'), ctx.idleTimeoutMs);
    this.idle.unref();
  }

  get key(): string {
    return this.ctx.key;
  }

  get instanceId(): string {
    return this.ctx.instanceId;
  }

  get ended(): boolean {
    return this.reason !== null || this.exit !== null;
  }

  /** How it exited, once it has. */
  get exitInfo(): ChildExit | null {
    return this.exit;
  }

  get onmessage(): ((message: JSONRPCMessage) => void) | undefined {
    return this.messageHandler;
  }

  set onmessage(handler: ((message: JSONRPCMessage) => void) | undefined) {
    this.messageHandler = handler;
    if (handler && !this.reading) this.startReading();
  }

  get onexit(): ((exit: ChildExit) => void) | undefined {
    return this.exitHandler;
  }

  set onexit(handler: ((exit: ChildExit) => void) | undefined) {
    this.exitHandler = handler;
    const exit = this.exit;
    if (handler && exit && this.exitNotified) queueMicrotask(() => handler(exit));
  }

  send(message: JSONRPCMessage): void {
    if (this.ended) throw new AppError('upstream_unavailable', 'The command server has ended.');
    const stdin = this.proc.stdin!;
    stdin.write(`${JSON.stringify(message)}\n`);
    this.idle.refresh();
    // a child that stops reading its stdin would have svc hold all that is sent to it
    if (stdin.writableLength > STDIN_BACKLOG_BYTES) void this.end('stdin_full');
  }

  close(): Promise<void> {
    return this.end('stopped');
  }

  /** Ends it for `reason`: stdin closed (a server that exits at end of input does), TERM to its group, KILL after the grace. */
  end(reason: ExitReason): Promise<void> {
    if (this.ended) return this.gone;
    this.reason = reason;
    clearTimeout(this.idle);
    this.stopReading();
    this.proc.stdin!.end();
    void this.endGroup();
    return this.gone;
  }

  private endGroup(): Promise<void> {
    return (this.groupEnding ??= endGroup(this.pid));
  }

  private startReading() {
    this.reading = true;
    this.proc.stdout!.on('data', (chunk: Buffer) => this.onStdout(chunk));
  }

  private stopReading() {
    this.proc.stdout!.removeAllListeners('data');
    this.proc.stdout!.destroy();
  }

  private onStdout(chunk: Buffer) {
    if (this.reason) return;
    this.idle.refresh();
    if (!this.stdout.push(chunk, (line) => this.onLine(line))) void this.end('line_too_long');
  }

  private onLine(line: Buffer) {
    if (this.reason) return;
    const text = line.toString('utf8');
    if (text.trim() === '') return;
    const messages = messagesOfLine(text);
    if (!messages) {
      void this.end('not_json_rpc');
      return;
    }
    for (const message of messages) {
      if (this.reason) return;
      try {
        this.messageHandler?.(message);
      } catch (err) {
        this.ctx.logger.error({ err, mcp_instance: this.ctx.instanceId, pid: this.pid }, 'a command server message handler failed');
      }
    }
  }

  private onProcessExit(code: number | null, signal: NodeJS.Signals | null) {
    clearTimeout(this.idle);
    const exit: ChildExit = { code, signal, at: new Date(this.ctx.clock()).toISOString(), reason: this.reason ?? 'crash' };
    this.exit = exit;
    this.proc.stdin!.destroy();
    // what is left of its group (children it forked) goes with it
    const groupLeft = groupAlive(this.pid);
    if (!groupLeft) this.markGone();
    else void this.endGroup().then(() => this.markGone());
    if (this.reason !== null) return this.notifyExit(exit);
    // it exited by itself: what it wrote just before (an answer, or why it failed on stderr) is read first
    const streams = [this.reading ? this.proc.stdout! : null, this.proc.stderr!].filter((s) => s !== null && !s.readableEnded && !s.destroyed);
    let open = streams.length;
    if (open === 0) return this.notifyExit(exit);
    const closed = () => {
      if (--open === 0) this.notifyExit(exit);
    };
    for (const stream of streams) stream!.once('close', closed);
    setTimeout(() => this.notifyExit(exit), DRAIN_MS).unref();
  }

  private notifyExit(exit: ChildExit) {
    if (this.exitNotified) return;
    this.exitNotified = true;
    if (!this.reason) this.stopReading();
    this.ctx.onExit(this, exit);
    try {
      this.exitHandler?.(exit);
    } catch (err) {
      this.ctx.logger.error({ err, mcp_instance: this.ctx.instanceId, pid: this.pid }, 'a command server exit handler failed');
    }
    this.resolveExited(exit);
  }

  private markGone() {
    if (this.goneMarked) return;
    this.goneMarked = true;
    this.ctx.onGone(this);
    this.resolveGone();
  }
}
