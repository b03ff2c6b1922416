import { LATEST_PROTOCOL_VERSION, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { VERSION } from '../../version.js';
import { describeExit } from './supervisor.js';
import type { ChildInit } from './modern.js';
import type { ChildExit, CommandChild } from './types.js';

/** Where an answer of the child goes: the app's transport, under the id the app gave. */
export interface AnswerSink {
  send(message: JSONRPCMessage): Promise<void> | void;
}

interface Pending {
  appId: string | number;
  sink: AnswerSink;
  timer: NodeJS.Timeout;
}

const endedMessage = (exit: ChildExit) => `The command server ${describeExit(exit)} before it answered.`;
const isRequest = (m: JSONRPCMessage): m is JSONRPCMessage & { id: string | number; method: string } => 'method' in m && 'id' in m;
const isAnswer = (m: JSONRPCMessage): m is JSONRPCMessage & { id: string | number } => 'id' in m && ('result' in m || 'error' in m);

/**
 * One child's JSON-RPC, shared by the requests of one session (or one grant): each request gets
 * an id of svc's own on the child's stdin, so two requests with the same id (stateless clients
 * reuse them) never meet, and the answer goes back under the app's id to the request it answers.
 * A request not answered within the timeout, or pending when the child ends, is answered with a
 * JSON-RPC error at once. What the server sends of its own (notifications, its requests) goes to
 * `onServerMessage` (the session's GET stream).
 */
export class ChildBridge {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private exit: ChildExit | null = null;
  onServerMessage?: (m: JSONRPCMessage) => void;
  /** What the child said at svc's initialize (what `server/discover` answers from). */
  initialized: ChildInit = {};

  constructor(
    readonly child: CommandChild,
    private readonly timeoutMs: number,
    onEnd: (exit: ChildExit) => void,
  ) {
    child.onmessage = (m) => this.fromChild(m);
    child.onexit = (exit) => {
      this.exit = exit;
      this.failAll(endedMessage(exit));
      onEnd(exit);
    };
  }

  /** A message of the app's to the child; a request's answer goes to `sink`. */
  toChild(m: JSONRPCMessage, sink: AnswerSink): void {
    if (!isRequest(m)) return this.sendOrDrop(m);
    const id = this.nextId++;
    const timer = setTimeout(() => this.answerError(id, -32001, `The command server did not answer within ${this.timeoutMs} ms.`), this.timeoutMs);
    timer.unref();
    this.pending.set(id, { appId: m.id, sink, timer });
    try {
      this.child.send({ ...m, id } as JSONRPCMessage);
    } catch {
      // it has ended: its exit, once known, answers the request with how it ended (failAll)
      if (this.exit) this.answerError(id, -32603, endedMessage(this.exit));
    }
  }

  /** svc's own initialize of a child that serves stateless requests (no app sends one). */
  async initialize(): Promise<void> {
    const answer = await new Promise<JSONRPCMessage>((resolve) => {
      this.toChild({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'svc', version: VERSION } } }, { send: resolve });
    });
    if ('error' in answer) throw new Error(String((answer.error as { message?: unknown }).message ?? 'initialize failed'));
    if ('result' in answer && answer.result && typeof answer.result === 'object') this.initialized = answer.result as ChildInit;
    this.sendOrDrop({ jsonrpc: '2.0', method: 'notifications/initialized' });
  }

  close(): Promise<void> {
    return this.child.close();
  }

  private sendOrDrop(m: JSONRPCMessage) {
    try {
      this.child.send(m);
    } catch {
      /* ended: nothing waits for an answer to a notification */
    }
  }

  private fromChild(m: JSONRPCMessage) {
    if (isAnswer(m) && typeof m.id === 'number' && this.pending.has(m.id)) return this.answer(m.id, m);
    if (isAnswer(m)) return; // an answer to nothing svc sent: dropped
    this.onServerMessage?.(m);
  }

  private answer(id: number, m: JSONRPCMessage) {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    void Promise.resolve(p.sink.send({ ...m, id: p.appId } as JSONRPCMessage)).catch(() => undefined);
  }

  private answerError(id: number, code: number, message: string) {
    this.answer(id, { jsonrpc: '2.0', id, error: { code, message } } as JSONRPCMessage);
  }

  private failAll(message: string) {
    for (const id of [...this.pending.keys()]) this.answerError(id, -32603, message);
  }
}
