import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { inert } from './text.js';

export type { Logger };

/**
 * Structured logs. Secrets never reach the logger in the first place (we log ids, not bodies);
 * the redaction list is a second line of defence for the headers that carry credentials.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream, format: 'human' | 'json' = 'json'): Logger {
  const out = destination ?? process.stdout;
  return pino(
    {
      level,
      base: { name: 'svc' },
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]', '*.password', '*.api_key', '*.token'],
        censor: '[redacted]',
      },
    },
    format === 'human' ? humanLines(out) : out,
  );
}

const LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
const SKIPPED = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'requestId']);

/**
 * Log lines for a person at a terminal: `12:01:02 GET /v1/models 200 3 ms` for a request, and
 * `12:01:02 warn message key=value` otherwise. The listening line is the serve command's own.
 */
export function humanLines(out: NodeJS.WritableStream): NodeJS.WritableStream {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (!text) continue;
        let entry: Record<string, unknown>;
        try {
          entry = JSON.parse(text) as Record<string, unknown>;
        } catch {
          out.write(`${text}\n`);
          continue;
        }
        if (entry.msg === 'svc listening') continue;
        const time = new Date(Number(entry.time)).toTimeString().slice(0, 8);
        if (entry.msg === 'request') {
          // an app's call says whose it is: the app, its grant, and the model or tool (never content)
          const who = entry.app ? ` ${word(entry.app, 60)} grant ${word(entry.grant ?? '', 8)}` : '';
          const what = entry.model ? ` model ${word(entry.model, 80)}` : entry.tool ? ` tool ${word(entry.tool, 80)}` : '';
          out.write(`${time} ${entry.method} ${inert(String(entry.path ?? ''), 120)} ${entry.status} ${entry.ms} ms${who}${what}\n`);
          continue;
        }
        const level = LEVELS[Number(entry.level)] ?? '';
        const fields = Object.entries(entry)
          .filter(([k]) => !SKIPPED.has(k))
          .map(([k, v]) => `${k}=${word(typeof v === 'string' ? v : JSON.stringify(v), 120)}`);
        out.write(`${time} ${level === 'info' ? '' : `${level} `}${inert(String(entry.msg ?? ''), 300)}${fields.length ? ` ${fields.join(' ')}` : ''}\n`);
      }
      done();
    },
  });
}

/**
 * A value in a human log line, made inert and kept one word: quoted when it holds a space, `=` or a
 * quote, so an app's name or a tool's cannot pass for more fields of the line ("x grant 1234").
 */
function word(value: unknown, max: number): string {
  const text = inert(String(value), max);
  return /[\s="]/.test(text) ? JSON.stringify(text) : text;
}

export { inert } from './text.js';
