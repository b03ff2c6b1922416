/** Helpers for the command supervisor's tests: hostile servers, a captured log, and whether a process runs. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { createLogger, type Logger } from '../../src/log.js';
import { CommandSupervisor, type CommandChild, type CommandSpec, type SupervisorOptions } from '../../src/mcp/command/supervisor.js';
import type { JSONRPCMessage } from '../../src/mcp/command/types.js';
import { eventually } from './wait.js';

export const HOSTILE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'hostile-stdio');

/** A command line that runs one of the hostile servers with this node. */
export function hostile(name: string, args: string[] = [], env: Record<string, string> = {}): CommandSpec {
  return { command: process.execPath, args: [path.join(HOSTILE, `${name}.mjs`), ...args], env, cwd: null };
}

/** A logger whose JSON lines the test reads back. */
export function capturedLogger(): { logger: Logger; lines: () => Record<string, any>[]; text: () => string } {
  const chunks: string[] = [];
  const out = new Writable({
    write(chunk, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger('debug', out);
  const text = () => chunks.join('');
  const lines = () =>
    text()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, any>);
  return { logger, lines, text };
}

/** A process that runs (a zombie, only waiting to be reaped, does not). */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

export function tempDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-cmd-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A supervisor on a temp record file with test-sized bounds; `done()` stops it and removes the dir. */
export function testSupervisor(over: Partial<SupervisorOptions> = {}) {
  const tmp = tempDir();
  const log = capturedLogger();
  const sup = new CommandSupervisor({
    recordFile: path.join(tmp.dir, 'command-children.json'),
    logger: log.logger,
    maxPerInstance: 4,
    maxTotal: 8,
    idleTimeoutMs: 60_000,
    maxLineBytes: 1024 * 1024,
    ...over,
  });
  return {
    sup,
    log,
    dir: tmp.dir,
    done: async () => {
      await sup.stopAll();
      tmp.remove();
    },
  };
}

/** A JSON-RPC session on a child: requests answered by id, notifications counted. */
export function session(child: CommandChild) {
  let nextId = 1;
  const waiting = new Map<number | string, (m: JSONRPCMessage) => void>();
  const received: JSONRPCMessage[] = [];
  child.onmessage = (m) => {
    received.push(m);
    if ('id' in m && ('result' in m || 'error' in m)) waiting.get(m.id as number)?.(m);
  };
  const request = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<any>((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      child.send({ jsonrpc: '2.0', id, method, params });
    });
  const initialize = () => request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } });
  const call = (name: string, args: Record<string, unknown> = {}) => request('tools/call', { name, arguments: args });
  return { request, initialize, call, received };
}

export async function gone(pid: number, what: string, timeoutMs = 10_000): Promise<void> {
  await eventually(() => !running(pid), what, timeoutMs);
}
